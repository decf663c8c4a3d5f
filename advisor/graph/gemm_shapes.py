"""GEMM sizes (M, K, N) behind GPU kernels, where the trace can tell them.

A kernel's name rarely says its problem size; the framework operator that launched it does.
Two sources, in order:

* the launching operator's recorded inputs: Kineto ``record_shapes`` (``Input Dims``), or the
  ``sizes = [...]`` text of the ranges ``torch.autograd.profiler.emit_nvtx(record_shapes=True)``
  and nsys ``--pytorch=autograd-shapes-nvtx`` put around every operator;
* a **shape probe**: `advisor profile --nsys` runs one step just before its window under
  ``emit_nvtx(record_shapes=True)``, inside a range named `SHAPE_PROBE_RANGE` that is not a
  step (operator ranges on every recorded step would inflate the host time the analysis
  measures). The nsys ingest reads that step alone and keeps, per kernel signature (name, grid,
  block), the sizes of the GEMM operators that launched it (`OpGraph.probe_gemm_sizes`): the
  window's steps launch the same kernels with the same configurations, and a signature stands
  for one problem shape closely enough to tell whether its sizes are tensor-core aligned (a
  signature seen with several sizes is answered with those whose probe kernels took about as
  long as the kernel asked about, and the caller decides: `candidate_sizes`).
"""

from __future__ import annotations

from collections import defaultdict

from advisor.graph.kernels import input_shapes
from advisor.graph.model import GpuOp, GpuOpKind, OpGraph

SHAPE_PROBE_RANGE = "advisor operator shapes"
"""The NVTX range `advisor profile --nsys` puts around its shape-probe step. Its name has no
"step" or "iter" in it, so no step finder takes the probe (slowed by its operator ranges) for a
training step."""

GEMM_OPERATORS = frozenset({"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm",
                            "aten::_addmm_activation"})
"""Operators whose inputs give a GEMM's sizes (M x K times K x N, batched or with a bias)."""

Signature = tuple[str, tuple[int, int, int] | None, tuple[int, int, int] | None]
Sizes = tuple[int, int, int]


def operator_name(name: str) -> str:
    """The operator a range names: ``aten::mm`` for emit_nvtx's ``aten::mm, seq = 3, sizes = ...``."""
    return name.split(",", 1)[0]


def gemm_sizes(shapes: tuple) -> Sizes | None:
    """M, K and N of a GEMM operator's two matrix inputs (the last two 2-D-or-more inputs)."""
    mats = [s for s in shapes if isinstance(s, tuple) and len(s) >= 2
            and all(isinstance(d, int) for d in s)]
    if len(mats) < 2:
        return None
    a, b = mats[-2], mats[-1]
    return a[-2], a[-1], b[-1]


def signature(op: GpuOp) -> Signature:
    """What identifies one GEMM configuration across steps: the kernel and its launch shape."""
    return op.name, op.grid, op.block


def launched_gemm_sizes(graph: OpGraph, op: GpuOp) -> Sizes | None:
    """The sizes of the innermost GEMM operator around the call that launched ``op``."""
    call = graph.launcher(op)
    if call is None:
        return None
    for r in reversed(graph.ranges_at(call.pid, call.tid, call.start_ns)):
        if operator_name(r.name) in GEMM_OPERATORS:
            shapes = input_shapes(r)
            return gemm_sizes(shapes) if shapes else None
    return None


def sizes_by_signature(graph: OpGraph) -> dict[Signature, tuple[tuple[Sizes, int], ...]]:
    """Every kernel signature launched by a GEMM operator with known sizes -> (sizes, kernel
    duration) of each such launch, one entry per distinct sizes (the shortest duration)."""
    out: dict[Signature, dict[Sizes, int]] = defaultdict(dict)
    for op in graph.gpu_ops:
        if op.kind is not GpuOpKind.KERNEL:
            continue
        sizes = launched_gemm_sizes(graph, op)
        if sizes is not None:
            seen = out[signature(op)]
            seen[sizes] = min(seen.get(sizes, op.duration_ns), op.duration_ns)
    return {k: tuple(sorted(v.items())) for k, v in out.items()}


SAME_DURATION = 1.5
"""Probe launches of one signature whose durations are within this factor of the closest one
are taken as candidates together (run-to-run spread of one GEMM is a few percent)."""


def candidate_sizes(graph: OpGraph, op: GpuOp) -> frozenset[Sizes]:
    """The sizes ``op``'s GEMM may have: its launching operator's, else the shape probe's for
    its signature; empty when neither tells.

    One signature can stand for several problems: a split-K GEMM's grid follows its output,
    so GPT-2's 8192x768 = (8192x3072)(3072x768) and (8192x50257)(50257x768) backward GEMMs share
    kernel and grid. Their durations differ as their work does, so the probe's launches whose
    duration is closest to ``op``'s are the candidates."""
    sizes = launched_gemm_sizes(graph, op)
    if sizes is not None:
        return frozenset((sizes,))
    seen = graph.probe_gemm_sizes.get(signature(op), ())
    if len(seen) <= 1:
        return frozenset(s for s, _ in seen)
    d = max(op.duration_ns, 1)

    def distance(entry: tuple[Sizes, int]) -> float:
        ratio = max(entry[1], 1) / d
        return max(ratio, 1 / ratio)

    best = min(distance(e) for e in seen)
    return frozenset(s for s, dur in seen if distance((s, dur)) <= best * SAME_DURATION)
