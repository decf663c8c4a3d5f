"""GEMM work from an nsys capture's shape probe, for kernels no operator range sizes.

`advisor profile --nsys` records one step's operator shapes apart from the analysed steps
(`advisor.graph.gemm_shapes`); this module turns what it saw into each window kernel's work,
only where the FLOPs are known: the sizes at the kernel's position in its step, the one size
its signature had, or several candidates that all do the same work. A split-K GEMM's reduction
(or cuBLASLt's epilogue) kernel joins its GEMM as one instance, so its FLOPs are counted once.
Everything else stays unknown: the efficiency model reports its share of the GEMM/attention
time and the MFU as a lower bound.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from advisor.graph.flops import Work, gemm_work
from advisor.graph.gemm_shapes import (
    GEMM_FOLLOWER,
    Sizes,
    candidate_sizes,
    gemm_partners,
    sizes_by_position,
)
from advisor.graph.model import GpuOp, OpGraph, Step


@dataclass(frozen=True)
class ProbeSizes:
    """What the shape probe tells about the analysed steps' kernels (`advisor.graph.gemm_shapes`):
    sizes by position, and the GEMM before each split-K reduction or cuBLASLt epilogue (one
    instance with it)."""

    positions: Mapping[int, Sizes]
    partners: Mapping[int, int]

    @classmethod
    def of(cls, graph: OpGraph, steps: Sequence[Step], ops: Sequence[GpuOp]) -> ProbeSizes:
        """What the probe of ``graph`` tells about ``ops``, the kernels of ``steps``."""
        if not graph.probe_gemm_sizes:
            return cls({}, {})
        positions = sizes_by_position(graph, steps, ops)
        by_id = {op.id: op for op in ops}

        def sizes(i: int) -> Sizes | None:
            if i in positions:
                return positions[i]
            c = candidate_sizes(graph, by_id[i])
            return next(iter(c)) if len(c) == 1 else None

        # a follower and the GEMM before it are one instance only when the probe sizes
        # both alike; a follower left alone has no work (its GEMM's would be counted twice)
        partners = {r: g for r, g in gemm_partners(graph, ops).items()
                    if sizes(r) is not None and sizes(r) == sizes(g)}
        return cls(positions, partners)


NO_PROBE = ProbeSizes({}, {})


def probe_work(graph: OpGraph, op: GpuOp, itemsize: int | None, probe: ProbeSizes) -> Work | None:
    """A GEMM kernel's work from the shape probe (`advisor.graph.gemm_shapes`): its sizes by
    position in the step, else the one size its signature had, else the sizes of like
    duration when they all give the same work (the same three dimensions in another order:
    ``(M, K, N)`` and ``(M, N, K)`` of GPT-2's MLP move and compute the same); None when the
    candidates' work differs, or for a split-K reduction or epilogue without its GEMM."""
    if GEMM_FOLLOWER.search(op.name) and op.id not in probe.partners:
        return None
    if op.id in probe.positions:
        m, k, n = probe.positions[op.id]
        return gemm_work("aten::mm", ((m, k), (k, n)), itemsize)
    sizes = sorted(candidate_sizes(graph, op))
    if not sizes:
        return None
    works = [gemm_work("aten::mm", ((m, k), (k, n)), itemsize) for m, k, n in sizes]
    if len(works) == 1:
        return works[0]
    if len({(w.flops, w.bytes) for w in works}) > 1:
        return None
    return replace(works[0], sizes=None,
                   reason="sizes one of " + ", ".join("x".join(map(str, s)) for s in sizes)
                   + " (the same work)")
