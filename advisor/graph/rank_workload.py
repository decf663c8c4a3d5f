"""A rank's workload signature, for the job gate to check rank by rank as the single gate does.

The job gate compared the job's step times and nothing else, so a two-rank DDP job against two
unrelated single-GPU traces (or a job of one model against a job of another) was a verdict. The
single gate refuses different workloads on the evidence of `advisor.gate.workload`: the kernels
per step (name and category), their launch geometry, and the host operators with their input
shapes. This module gathers the kernel evidence for one rank over its steady steps, inside the
Dask task that holds the rank's graph (`advisor.engine.rank_summary.summarize_graph`): a few kilobytes
travel, the graph stays on the worker. Host operators are not among it: the job path's slim
reader (`advisor.ingest.slim_trace`) leaves them out of the graph, so a rank whose step is CUDA
graph replays traced as single rows cannot be matched, and the job gate says so (exit 2).

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
from advisor.graph.model import GpuOp, GpuOpKind, Step
from advisor.graph.step_metrics import geometry_text

MAX_KERNEL_KEYS = 2000
"""Kernel names kept per rank (the most launched): a model has a few hundred; the cap bounds a
summary whatever a trace holds."""


@dataclass(frozen=True, slots=True)
class RankWorkload:
    """Per steady step of one rank: each kernel (and CUDA graph replay) with its category,
    launches and launch geometries."""

    kernels: tuple[tuple[str, str, float, tuple[tuple[str, float], ...]], ...] = ()


def rank_workload(steps: Sequence[Step], ops: Sequence[GpuOp]) -> RankWorkload:
    """The rank's workload over ``steps`` (its steady steps, or another process's step windows
    when it has none of its own) from ``ops``, its GPU ops sorted by start."""
    if not steps:
        return RankWorkload()
    starts = [o.start_ns for o in ops]
    counts: dict[str, int] = defaultdict(int)
    categories: dict[str, str] = {}
    # launches per (grid, block): each distinct geometry is written as text once, at the end
    # (`step_metrics.geometry` per launch was a fifth of a rank's workload; the text is one-to-one with the
    # pair, so the counts and their order are the same)
    launches: dict[str, dict[tuple, int]] = defaultdict(lambda: defaultdict(int))
    kinds = (GpuOpKind.KERNEL, GpuOpKind.GRAPH)
    for step in steps:
        lo = step.gpu_start_ns if step.gpu_start_ns is not None else step.cpu_start_ns
        hi = step.gpu_end_ns if step.gpu_end_ns is not None else step.cpu_end_ns
        for o in ops[bisect_left(starts, lo):bisect_left(starts, hi)]:
            if o.kind not in kinds:
                continue
            name = o.name
            counts[name] += 1
            if name not in categories:
                categories[name] = classify(o).value
            if o.grid is not None and o.block is not None:
                launches[name][(o.grid, o.block)] += 1
    n = len(steps)
    kept = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_KERNEL_KEYS]

    def shapes(name: str) -> tuple[tuple[str, float], ...]:
        text = {geometry_text(g, b): c for (g, b), c in launches[name].items()}
        return tuple((g, c / n) for g, c in sorted(text.items()))

    kernels = tuple((name, categories[name], count / n, shapes(name)) for name, count in kept)
    return RankWorkload(kernels)
