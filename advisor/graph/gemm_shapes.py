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
  block), the sizes of the GEMM operators that launched it, launch by launch in launch order
  (`OpGraph.probe_gemm_sizes`). The window's steps run the same program: they launch the same
  kernels, with the same configurations, in the same order. A signature seen with one size
  stands for it; one seen with several (cuBLAS's persistent Hopper GEMMs run one grid, one
  block per SM pair, whatever the problem) is resolved by position: the k-th launch of a
  signature in a step is the probe's k-th when the step launches it as often as the probe did
  and every launch took about as long as its probe counterpart (`sizes_by_position`); else by
  duration, those whose probe kernels took about as long as the kernel asked about, and the
  caller decides (`candidate_sizes`).
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence

from advisor.graph.kernels import input_shapes
from advisor.graph.model import GpuOp, GpuOpKind, OpGraph, Step

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


def launch_ns(graph: OpGraph, op: GpuOp) -> int:
    """When ``op`` was enqueued: its launch call's start (program order, whatever stream the
    kernel ran on), else the kernel's own start."""
    call = graph.launcher(op)
    return call.start_ns if call is not None else op.start_ns


def sizes_by_signature(graph: OpGraph) -> dict[Signature, tuple[tuple[Sizes, int], ...]]:
    """Every kernel signature launched by a GEMM operator with known sizes -> (sizes, kernel
    duration) of each such launch, in launch order (`sizes_by_position` matches them to a
    step's launches one by one; `candidate_sizes` reads the distinct sizes)."""
    out: dict[Signature, list[tuple[int, Sizes, int]]] = defaultdict(list)
    for op in graph.gpu_ops:
        if op.kind is not GpuOpKind.KERNEL:
            continue
        sizes = launched_gemm_sizes(graph, op)
        if sizes is not None:
            out[signature(op)].append((launch_ns(graph, op), sizes, op.duration_ns))
    return {k: tuple((s, d) for _, s, d in sorted(v)) for k, v in out.items()}


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
    shortest: dict[Sizes, int] = {}
    for s, dur in graph.probe_gemm_sizes.get(signature(op), ()):
        shortest[s] = min(shortest.get(s, dur), dur)
    seen = tuple(shortest.items())
    if len(seen) <= 1:
        return frozenset(s for s, _ in seen)
    d = max(op.duration_ns, 1)

    def distance(entry: tuple[Sizes, int]) -> float:
        ratio = max(entry[1], 1) / d
        return max(ratio, 1 / ratio)

    best = min(distance(e) for e in seen)
    return frozenset(s for s, dur in seen if distance((s, dur)) <= best * SAME_DURATION)


def _same_duration(a: int, b: int) -> bool:
    a, b = max(a, 1), max(b, 1)
    return max(a, b) / min(a, b) <= SAME_DURATION


def sizes_by_position(graph: OpGraph, steps: Sequence[Step],
                      ops: Iterable[GpuOp]) -> dict[int, Sizes]:
    """GpuOp id -> sizes, for the GEMM kernels of ``steps`` that the shape probe sizes by
    position: per step and signature, the step's launches in launch order against the probe's.

    Taken only where the step launched the signature exactly as often as the probe recorded it
    with sizes, and each launch took within `SAME_DURATION` of its probe counterpart: a
    signature the probe launched once outside a GEMM operator, or a step that ran a different
    sequence (an evaluation step, a changed batch), is left to `candidate_sizes`."""
    probe = graph.probe_gemm_sizes
    if not probe or not steps:
        return {}
    spans = sorted((s.cpu_start_ns, s.cpu_end_ns) for s in steps)
    starts = [a for a, _ in spans]
    groups: dict[tuple[int, Signature], list[tuple[int, GpuOp]]] = defaultdict(list)
    for op in ops:
        if op.kind is not GpuOpKind.KERNEL or signature(op) not in probe:
            continue
        t = launch_ns(graph, op)
        i = bisect.bisect_right(starts, t) - 1
        if i >= 0 and t < spans[i][1]:
            groups[(i, signature(op))].append((t, op))
    out: dict[int, Sizes] = {}
    for (_, sig), launched in groups.items():
        entries = probe[sig]
        launched.sort(key=lambda e: e[0])
        if len(launched) != len(entries) or not all(
                _same_duration(op.duration_ns, dur)
                for (_, op), (_, dur) in zip(launched, entries, strict=True)):
            continue
        out.update((op.id, sizes) for (_, op), (sizes, _) in zip(launched, entries, strict=True))
    return out


GEMM_FOLLOWER = re.compile(r"splitKreduce|ReduceSplitK|splitk_reduce|cublasLt::epilogue", re.I)
"""The second kernel of one GEMM: cuBLAS(Lt)'s and CUTLASS's split-K reductions, which sum the
first kernel's partial products, and cuBLASLt's separate epilogue (bias, activation) after an
``sgemm_largek`` (`gemm_partners`)."""


def gemm_partners(graph: OpGraph, ops: Iterable[GpuOp]) -> dict[int, int]:
    """GpuOp id of each GEMM follower kernel -> id of the GEMM kernel it finishes: the kernel
    its thread launched just before it. Without operator ranges (nsys) each kernel stands
    alone, and the probe sizes both after their operator: counted apart, such a GEMM's FLOPs
    would be counted twice (GPT-2's (768 x 16384)(16384 x 768) weight gradient, split-K;
    ViT-B's FP32 classifier head, ``sgemm_largek`` and its epilogue)."""
    launched: dict[tuple[int, int], list[tuple[int, GpuOp]]] = defaultdict(list)
    for op in ops:
        call = graph.launcher(op) if op.kind is GpuOpKind.KERNEL else None
        if call is not None:
            launched[(call.pid, call.tid)].append((call.start_ns, op))
    out: dict[int, int] = {}
    for seq in launched.values():
        seq.sort(key=lambda e: e[0])
        for (_, before), (_, op) in itertools.pairwise(seq):
            if GEMM_FOLLOWER.search(op.name) and not GEMM_FOLLOWER.search(before.name):
                out[op.id] = before.id
    return out
