"""Per-step facts the gate compares, computed once from an analysis.

The analysis summary keeps medians; a gate needs more: the distributions (step time and GPU-busy
time of every steady step) to test a change against the run's own noise, per-step counts that do
not depend on timing (launches, synchronizing calls, pageable copies, CUDA graph replays) to see
an anti-pattern appear even when it costs little, the whole kernel mix to tell a changed workload
from a changed implementation, and the host time between launches to tell a slower machine from
slower code. The report model (`advisor.report.model`) carries these and its JSON writes them, so a
saved result gates like a trace.
"""

from __future__ import annotations

import itertools
import statistics
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from advisor.graph import api_names
from advisor.graph.kernels import classify
from advisor.graph.model import ApiCall, CpuRange, GpuOp, GpuOpKind, OpGraph, RangeSource, Step
from advisor.graph.step_breakdown import StepBreakdown

COUNT_NAMES = (
    "kernels",  # kernels launched (graph replays count once, under graph_launches)
    "launches",  # kernel and graph launch calls
    "graph_launches",  # cudaGraphLaunch calls: CUDA graph replays
    "api_calls",  # every traced CUDA runtime/driver call
    "sync_calls",  # explicit synchronizations (cudaStreamSynchronize, cudaDeviceSynchronize ...)
    "copies",  # memcpy operations on the GPU
    "pageable_copies",  # of which from or to pageable host memory
    "copy_bytes",
    "memsets",
    # kernels launched between one steady step and the next (after a step's end, before the
    # next one's start), per gap: step ranges that cover the step leave none there
    "kernels_between_steps",
)
"""Per-step counts, each the median over the steady steps (a one-off step does not move it)."""

INTERVAL_QUANTILES = ("p25", "p50", "p75")


MAX_OP_KEYS = 2000  # operator signatures kept per run (the most frequent): plenty to identify it


@dataclass(frozen=True)
class KernelUse:
    name: str  # the full demangled name: template arguments tell GELU from ReLU
    category: str
    count_per_step: float
    ns_per_step: float
    # Launch geometry ("grid/block", e.g. "128x1x1/256x1x1") -> launches per step: sizes of the
    # tensors the kernel ran on, which a changed model changes and a fix elsewhere does not.
    shapes: Mapping[str, float] = field(default_factory=dict)


def geometry(op: GpuOp) -> str | None:
    if op.grid is None or op.block is None:
        return None
    return geometry_text(op.grid, op.block)


def geometry_text(grid: tuple[int, ...], block: tuple[int, ...]) -> str:
    """A launch's grid and block as text ("128x1x1/256x1x1"): one-to-one with the pair."""
    return "x".join(map(str, grid)) + "/" + "x".join(map(str, block))


def op_signature(name: str, shapes: tuple | None) -> str:
    """A host operator with its input shapes (``aten::addmm [[64, 512], [512, 2048]]``)."""
    return name if not shapes else f"{name} {list(shapes)}"


@dataclass(frozen=True)
class StepMetrics:
    steady_times_ns: tuple[int, ...]  # the analysed steady steps, in order
    gpu_busy_ns: tuple[int, ...]  # GPU-busy time of the same steps
    counts: Mapping[str, float] = field(default_factory=dict)  # `COUNT_NAMES` -> per step
    # Host time from one launch call to the next on the same thread (quantiles and mean, ns):
    # a slower host stretches all of them, slower code only some.
    launch_interval_ns: Mapping[str, float] = field(default_factory=dict)
    kernels: tuple[KernelUse, ...] = ()  # every kernel name and graph replay, by time
    # Host operators (torch.profiler's aten ops) with their input shapes -> count per step: the
    # workload's identity on the host side, and the only one of a run without GPU work.
    ops: Mapping[str, float] = field(default_factory=dict)


class _CallIndex:
    """The steps' process calls, sorted, for slicing by step."""

    def __init__(self, graph: OpGraph, pids: set[int]) -> None:
        self._by_pid: dict[int, tuple[list[int], list[ApiCall]]] = {}
        grouped: dict[int, list[ApiCall]] = defaultdict(list)
        for c in graph.api_calls:  # sorted by start already
            if c.pid in pids:
                grouped[c.pid].append(c)
        for pid, calls in grouped.items():
            self._by_pid[pid] = ([c.start_ns for c in calls], calls)

    def during(self, step: Step) -> list[ApiCall]:
        """Calls of the step's process (every thread: autograd's too) made during the step."""
        return self.between(step.pid, step.cpu_start_ns, step.cpu_end_ns)

    def between(self, pid: int, start_ns: int, end_ns: int) -> list[ApiCall]:
        """Calls of process ``pid`` made from ``start_ns`` up to ``end_ns``."""
        starts, calls = self._by_pid.get(pid, ([], []))
        return calls[bisect_left(starts, start_ns) : bisect_left(starts, end_ns)]


def _window_ops(graph: OpGraph, starts: list[int], step: Step) -> list[GpuOp]:
    """GPU ops that started in the step's GPU interval: used when launches are not linked."""
    g0 = step.gpu_start_ns if step.gpu_start_ns is not None else step.cpu_start_ns
    g1 = step.gpu_end_ns if step.gpu_end_ns is not None else step.cpu_end_ns
    ops = graph.gpu_ops[bisect_left(starts, g0) : bisect_left(starts, g1)]
    return [o for o in ops if o.pid == step.pid]


def _intervals(launches: Sequence[ApiCall]) -> list[int]:
    by_thread: dict[int, list[int]] = defaultdict(list)
    for c in launches:
        by_thread[c.tid].append(c.start_ns)
    out: list[int] = []
    for starts in by_thread.values():
        starts.sort()
        out.extend(b - a for a, b in itertools.pairwise(starts))
    return out


def _quantiles(values: list[int]) -> dict[str, float]:
    if len(values) < 4:
        return {}
    q = statistics.quantiles(values, n=4, method="inclusive")
    return {"p25": q[0], "p50": q[1], "p75": q[2], "mean": statistics.fmean(values)}


def step_metrics(graph: OpGraph, rows: Sequence[StepBreakdown]) -> StepMetrics:
    """The gate's view of the analysed steps (``rows``, the step summary's breakdowns):
    distributions, counts and the kernel mix per step."""
    if not rows:
        return StepMetrics((), ())
    steps = [b.step for b in rows]
    index = _CallIndex(graph, {s.pid for s in steps})
    linked = any(graph.launcher(o) is not None for o in graph.gpu_ops[:5000])
    op_starts = [o.start_ns for o in graph.gpu_ops]
    per_step: dict[str, list[float]] = {k: [] for k in COUNT_NAMES}
    kernel_totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])  # count, ns, cat
    categories: dict[str, str] = {}
    shapes: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    ops_total: dict[str, int] = defaultdict(int)
    intervals: list[int] = []
    op_threads: dict[int, set[int]] = defaultdict(set)
    for r in graph.ranges:
        if r.source is RangeSource.OPERATOR:
            op_threads[r.pid].add(r.tid)
    for step in steps:
        for r in _operators(graph, step, op_threads.get(step.pid, ())):
            ops_total[op_signature(r.name, r.shapes)] += 1
        calls = index.during(step)
        launches = [c for c in calls if api_names.is_launch(c.name)]
        intervals.extend(_intervals(launches))
        ops = ([o for c in calls for o in graph.launched(c)] if linked
               else _window_ops(graph, op_starts, step))
        copies = [o for o in ops if o.kind is GpuOpKind.MEMCPY]
        counts = {
            "kernels": sum(1 for o in ops if o.kind is GpuOpKind.KERNEL),
            "launches": len(launches),
            "graph_launches": sum(1 for c in launches if c.name in api_names.GRAPH_LAUNCH_CALLS),
            "api_calls": len(calls),
            "sync_calls": sum(1 for c in calls if api_names.is_sync(c.name)),
            "copies": len(copies),
            "pageable_copies": sum(1 for o in copies if o.host_memory == "pageable"),
            "copy_bytes": sum(o.bytes for o in copies),
            "memsets": sum(1 for o in ops if o.kind is GpuOpKind.MEMSET),
        }
        for k, v in counts.items():
            per_step[k].append(v)
        for o in ops:
            if o.kind in (GpuOpKind.KERNEL, GpuOpKind.GRAPH):
                t = kernel_totals[o.name]
                t[0] += 1
                t[1] += o.duration_ns
                shape = geometry(o)
                if shape is not None:
                    shapes[o.name][shape] += 1
                if o.name not in categories:
                    categories[o.name] = classify(o).value
    per_step["kernels_between_steps"] = _kernels_between(graph, index, linked, op_starts, steps)
    n = len(steps)
    kernels = tuple(
        KernelUse(name, categories[name], count / n, ns / n,
                  {g: c / n for g, c in sorted(shapes[name].items())} if name in shapes else {})
        for name, (count, ns, _) in sorted(kernel_totals.items(), key=lambda kv: -kv[1][1])
    )
    frequent = sorted(ops_total.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_OP_KEYS]
    return StepMetrics(
        steady_times_ns=tuple(b.time_ns for b in rows),
        gpu_busy_ns=tuple(b.busy_ns for b in rows),
        counts={k: float(statistics.median(v)) for k, v in per_step.items()},
        launch_interval_ns=_quantiles(intervals),
        kernels=kernels,
        ops={k: c / n for k, c in sorted(frequent)},
    )


def _kernels_between(graph: OpGraph, index: _CallIndex, linked: bool, op_starts: list[int],
                     steps: Sequence[Step]) -> list[float]:
    """Kernels launched in each gap between consecutive steps of one thread (launched by the
    process's calls in the gap, or starting on the GPU in it when launches are not linked)."""
    out: list[float] = []
    for prev, nxt in itertools.pairwise(steps):
        if (prev.pid, prev.tid) != (nxt.pid, nxt.tid):
            continue
        if linked:
            ops = [o for c in index.between(prev.pid, prev.cpu_end_ns, nxt.cpu_start_ns)
                   for o in graph.launched(c)]
        else:
            g0 = prev.gpu_end_ns if prev.gpu_end_ns is not None else prev.cpu_end_ns
            g1 = nxt.gpu_start_ns if nxt.gpu_start_ns is not None else nxt.cpu_start_ns
            ops = [o for o in graph.gpu_ops[bisect_left(op_starts, g0):bisect_left(op_starts, g1)]
                   if o.pid == prev.pid]
        out.append(float(sum(1 for o in ops if o.kind is GpuOpKind.KERNEL)))
    return out or [0.0]


def _operators(graph: OpGraph, step: Step, tids: Iterable[int]) -> list[CpuRange]:
    """Host operator ranges of the step's process (its threads with operators) in the step."""
    return [r for tid in sorted(tids)
            for r in graph.ranges_in(step.pid, tid, step.cpu_start_ns, step.cpu_end_ns)
            if r.source is RangeSource.OPERATOR]
