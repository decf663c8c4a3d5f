"""A rank's workload signature, for the job gate to check rank by rank as the single gate does.

The job gate compared the job's step times and nothing else, so a two-rank DDP job against two
unrelated single-GPU traces (or a job of one model against a job of another) was a verdict. The
single gate refuses different workloads on the evidence of `advisor.gate.workload`: the kernels
per step (name and category), their launch geometry, and the host operators with their input
shapes. This module gathers the same evidence for one rank over its steady steps, inside the
Dask task that holds the rank's graph (`advisor.job.summary.summarize_graph`): a few kilobytes
travel, the graph stays on the worker.

The GPU ops of a step are those of the rank's process that start in the step's GPU window, the
window the rank summary uses for its times; both jobs are measured the same way, so the
comparison is like for like.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from advisor.graph.kernels import classify
from advisor.graph.model import GpuOp, GpuOpKind, OpGraph, RangeSource, Step
from advisor.graph.step_metrics import MAX_OP_KEYS, geometry, op_signature

MAX_KERNEL_KEYS = 2000
"""Kernel names kept per rank (the most launched): a model has a few hundred; the cap bounds a
summary whatever a trace holds."""


@dataclass(frozen=True, slots=True)
class RankWorkload:
    """Per steady step of one rank: each kernel (and CUDA graph replay) with its category,
    launches and launch geometries; each host operator with its input shapes."""

    kernels: tuple[tuple[str, str, float, tuple[tuple[str, float], ...]], ...] = ()
    ops: tuple[tuple[str, float], ...] = ()


def rank_workload(graph: OpGraph, steps: Sequence[Step], pid: int,
                  ops: Sequence[GpuOp]) -> RankWorkload:
    """The rank's workload over ``steps`` (its steady steps; another process's step windows
    when it has none of its own, in which case its host operators are not counted)."""
    if not steps:
        return RankWorkload()
    starts = [o.start_ns for o in ops]
    counts: dict[str, int] = defaultdict(int)
    categories: dict[str, str] = {}
    shapes: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for step in steps:
        lo = step.gpu_start_ns if step.gpu_start_ns is not None else step.cpu_start_ns
        hi = step.gpu_end_ns if step.gpu_end_ns is not None else step.cpu_end_ns
        for o in ops[bisect_left(starts, lo):bisect_left(starts, hi)]:
            if o.kind not in (GpuOpKind.KERNEL, GpuOpKind.GRAPH):
                continue
            counts[o.name] += 1
            if o.name not in categories:
                categories[o.name] = classify(o).value
            shape = geometry(o)
            if shape is not None:
                shapes[o.name][shape] += 1
    n = len(steps)
    kept = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_KERNEL_KEYS]
    kernels = tuple((name, categories[name], count / n,
                     tuple((g, c / n) for g, c in sorted(shapes[name].items())))
                    for name, count in kept)
    return RankWorkload(kernels, _operators(graph, steps, pid))


def _operators(graph: OpGraph, steps: Sequence[Step], pid: int) -> tuple[tuple[str, float], ...]:
    own = [s for s in steps if s.pid == pid]
    if not own:
        return ()
    tids = sorted({r.tid for r in graph.ranges
                   if r.pid == pid and r.source is RangeSource.OPERATOR})
    total: dict[str, int] = defaultdict(int)
    for step in own:
        for tid in tids:
            for r in graph.ranges_in(pid, tid, step.cpu_start_ns, step.cpu_end_ns):
                if r.source is RangeSource.OPERATOR:
                    total[op_signature(r.name, r.shapes)] += 1
    frequent = sorted(total.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_OP_KEYS]
    return tuple((k, c / len(own)) for k, c in sorted(frequent))
