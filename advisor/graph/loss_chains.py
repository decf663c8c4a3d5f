"""Which eager chains belong to a loss computed outside the model.

``torch.compile(model)`` compiles the module's forward (and, through AOTAutograd, its backward);
a loss computed after it (``loss = F.cross_entropy(model(x).float(), y)``) stays eager, forward
and backward. On a language model with a large vocabulary that loss is often the step's largest
memory-bound work: a cast of the logits, log-softmax, the NLL gather, and their gradients, each
reading and writing a tokens x vocabulary tensor. The compiler-fusion rule counts those chains
like the model's, so its fix must name the loss too, or it promises what ``torch.compile(model)``
does not deliver (gemm-shape-alignment's fixed step: compile of the model alone measured 1.078x
on the H200, where the chains, most of them the loss's, promised 1.49x; docs/validation.md).

What is the loss's, from the step's phase marks (``advisor profile`` and the scenarios mark a
``loss`` phase; a trace without one has none):
- forward: a chain launched inside a ``loss`` span that launches no compute kernel (GEMM,
  convolution, attention). Where the loss span holds the model's forward too (Hugging Face
  Trainer's ``compute_loss`` wraps ``model(**inputs)``), the loss is inside the model and
  ``torch.compile`` covers it: nothing is the loss's here.
- backward: autograd runs the loss's gradient first, so in each backward span, the chains that
  run before its first compute kernel, when that step's loss had chains.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

from advisor.graph.kernels import KernelCategory, classify
from advisor.graph.model import GpuOp, OpGraph, Step

COMPUTE = frozenset({KernelCategory.GEMM, KernelCategory.CONV, KernelCategory.ATTENTION})


def loss_chains(graph: OpGraph, steps: Sequence[Step],
                chains: Sequence[tuple[GpuOp, ...]]) -> list[tuple[GpuOp, ...]]:
    """The chains (of ``chains``) that belong to a loss computed outside the model."""
    starts = {id(c): _launch_ns(graph, c) for c in chains}
    out: list[tuple[GpuOp, ...]] = []
    for step in steps:
        losses = step.phases.get("loss", [])
        if not losses:
            continue
        mine = [c for c in chains if starts[id(c)] is not None
                and step.cpu_start_ns <= starts[id(c)] < step.cpu_end_ns]
        if not mine:
            continue
        outside = [span for span in losses if not _launches_compute(graph, span)]
        forward = [c for c in mine if any(a <= starts[id(c)] < b for a, b in outside)]
        if not forward:
            continue
        out += forward
        for a, b in step.phases.get("backward", []):
            first = _first_compute_launch(graph, a, b)
            out += [c for c in mine if a <= starts[id(c)] < (first if first is not None else b)]
    return out


def _launch_ns(graph: OpGraph, chain: tuple[GpuOp, ...]) -> int | None:
    call = graph.launcher(chain[0])
    return call.start_ns if call is not None else None


def _compute_launches(graph: OpGraph) -> list[int]:
    """Host launch times of every compute kernel, sorted (kept on the graph: asked per span)."""
    cache = graph.__dict__.get("_compute_launches")
    if cache is None:
        cache = sorted(call.start_ns for op in graph.gpu_ops if classify(op) in COMPUTE
                       and (call := graph.launcher(op)) is not None)
        graph.__dict__["_compute_launches"] = cache
    return cache


def _first_compute_launch(graph: OpGraph, start: int, end: int) -> int | None:
    times = _compute_launches(graph)
    i = bisect_left(times, start)
    return times[i] if i < len(times) and times[i] < end else None


def _launches_compute(graph: OpGraph, span: tuple[int, int]) -> bool:
    return _first_compute_launch(graph, *span) is not None
