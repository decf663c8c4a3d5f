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
``loss`` phase; a trace without one has none), kernel by kernel (a chain on the GPU stream often
runs the end of the model's forward, the loss and the start of its gradient back to back: where
the chain breaks says nothing about which code launched each kernel):
- forward: a chain's kernel launched inside a ``loss`` span that launches no compute kernel
  (GEMM, convolution, attention) of the step's process. Where the loss span holds the model's
  forward too (Hugging Face Trainer's ``compute_loss`` wraps ``model(**inputs)``), the loss is
  inside the model and ``torch.compile`` covers it: nothing is the loss's here. A loss with a
  GEMM of its own (contrastive, distillation, a fused linear cross-entropy) is not counted.
- backward: autograd runs the loss's gradient first, so in each backward span, the chains'
  kernels launched before the process's first compute launch there, when that step's loss had
  some, in launch order and up to `GRADIENT_PER_FORWARD` times the loss's forward time (what
  runs before the first GEMM can also be the gradient of a loss inside the model).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Sequence

from advisor.graph.kernels import KernelCategory, classify
from advisor.graph.model import GpuOp, OpGraph, Step

COMPUTE = frozenset({KernelCategory.GEMM, KernelCategory.CONV, KernelCategory.ATTENTION})
GRADIENT_PER_FORWARD = 2.0
"""The most a memory-bound loss's gradient costs per unit of its forward: an elementwise or
softmax-like op reads one tensor and writes one going forward; its gradient reads the incoming
gradient and the saved input or output and writes one (1.5x the traffic), with room for a cast
the forward fused into a read. A bound from the memory traffic, not a fit."""


def loss_kernels(graph: OpGraph, steps: Sequence[Step],
                 chains: Sequence[Sequence[GpuOp]]) -> list[GpuOp]:
    """The kernels (of ``chains``) that belong to a loss computed outside the model."""
    launched = sorted(((t, op) for c in chains for op in c
                       if (t := _launch_ns(graph, op)) is not None), key=lambda p: p[0])
    times = [t for t, _ in launched]
    out: list[GpuOp] = []
    for step in steps:
        losses = step.phases.get("loss", [])
        if not losses:
            continue
        outside = [span for span in losses if not _launches_compute(graph, step.pid, span)]
        forward = [op for a, b in outside for _, op in _between(launched, times, step.pid, a, b)]
        if not forward:
            continue
        out += forward
        # the gradient, in launch order, up to what a gradient of this forward can cost: the
        # rest before the first compute kernel is the model's (a loss inside the model, whose
        # loss span only scales or averages it: Hugging Face's)
        budget = GRADIENT_PER_FORWARD * sum(op.duration_ns for op in forward)
        for a, b in step.phases.get("backward", []):
            first = _first_compute_launch(graph, step.pid, a, b)
            for _, op in _between(launched, times, step.pid, a, first if first is not None else b):
                if op.duration_ns > budget:
                    break
                budget -= op.duration_ns
                out.append(op)
    return out


def _between(launched: list[tuple[int, GpuOp]], times: list[int], pid: int,
             start: int, end: int) -> list[tuple[int, GpuOp]]:
    """The process's kernels launched in [start, end), in launch order (``launched`` is sorted
    by launch time, ``times`` its keys)."""
    return [p for p in launched[bisect_left(times, start):bisect_left(times, end)] if p[1].pid == pid]


def _launch_ns(graph: OpGraph, op: GpuOp) -> int | None:
    call = graph.launcher(op)
    return call.start_ns if call is not None else None


def _compute_launches(graph: OpGraph) -> dict[int, list[int]]:
    """Per process, the host launch times of its compute kernels, sorted (kept on the graph,
    whose ops never change once built: asked per span)."""
    cache = graph.__dict__.get("_compute_launches")
    if cache is None:
        by_pid: defaultdict[int, list[int]] = defaultdict(list)
        for op in graph.gpu_ops:
            if classify(op) in COMPUTE and (call := graph.launcher(op)) is not None:
                by_pid[op.pid].append(call.start_ns)
        cache = graph.__dict__["_compute_launches"] = {p: sorted(t) for p, t in by_pid.items()}
    return cache


def _first_compute_launch(graph: OpGraph, pid: int, start: int, end: int) -> int | None:
    times = _compute_launches(graph).get(pid, [])
    i = bisect_left(times, start)
    return times[i] if i < len(times) and times[i] < end else None


def _launches_compute(graph: OpGraph, pid: int, span: tuple[int, int]) -> bool:
    return _first_compute_launch(graph, pid, *span) is not None
