"""Where each step's time goes: GPU busy and idle, why the GPU idled, phases, kernel mix.

Idle time is blamed on what the host was doing while every stream of the device was empty: the
innermost CUDA call it was in (a ``cudaStreamSynchronize``, a pageable ``cudaMemcpy``, a
``cudaMalloc``), else the innermost named range (a phase, an operator), else plain host work.
That is the answer to "why does the GPU wait".
"""

from __future__ import annotations

import statistics
from bisect import bisect_right
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from advisor.gc_pause import gc_paused
from advisor.graph.intervals import union_length
from advisor.graph.kernels import KernelCategory, classify, short_name
from advisor.graph.model import ApiCall, GpuOp, GpuOpKind, OpGraph, RangeSource, Step
from advisor.graph.op_names import operator_name
from advisor.graph.phase_content import RENAMED
from advisor.graph.projection import Projector
from advisor.graph.steps import phase_of, phase_order

LAUNCH_GAP_NS = 20_000
"""GPU gaps shorter than this, ending at a kernel launched just before, are launch latency."""


@dataclass
class StepBreakdown:
    step: Step
    time_ns: int
    busy_ns: int
    idle_ns: int
    idle_causes: dict[str, int]  # cause -> ns
    phases: dict[str, int]  # phase -> GPU-projected ns
    kernels: int
    api_calls: int


@dataclass
class KernelStat:
    name: str
    category: str
    count: int
    total_ns: int


@dataclass
class Summary:
    steps: list[StepBreakdown]
    all_step_times_ns: list[int]  # every step found, warm-up included, in order
    warmup_steps: int
    category_ns: dict[str, int] = field(default_factory=dict)  # per analysed step, mean
    top_kernels: list[KernelStat] = field(default_factory=list)

    def _median(self, values: Iterable[float]) -> float:
        v = list(values)
        return float(statistics.median(v)) if v else 0.0

    @property
    def median_step_ns(self) -> float:
        return self._median(b.time_ns for b in self.steps)

    @property
    def mean_step_ns(self) -> float:
        return statistics.fmean(b.time_ns for b in self.steps) if self.steps else 0.0

    @property
    def median_busy_ns(self) -> float:
        return self._median(b.busy_ns for b in self.steps)

    def phase_medians_ns(self) -> dict[str, float]:
        names = phase_order({p for b in self.steps for p in b.phases})
        return {p: self._median(b.phases.get(p, 0) for b in self.steps) for p in names}

    def idle_cause_medians_ns(self) -> dict[str, float]:
        causes = Counter()
        for b in self.steps:
            causes.update(b.idle_causes)
        n = max(1, len(self.steps))
        return {c: ns / n for c, ns in causes.most_common()}


def _launched_at(graph: OpGraph, next_op: GpuOp | None) -> int | None:
    """When the op that ends an idle gap was launched, if that launch explains the gap's
    tail (launched at most `LAUNCH_GAP_NS` before it ran); None otherwise."""
    if next_op is not None:
        launcher = graph.launcher(next_op)
        if launcher is not None and 0 <= next_op.start_ns - launcher.start_ns <= LAUNCH_GAP_NS:
            return launcher.start_ns
    return None


def _host_causes(graph: OpGraph, step: Step) -> Callable[[int], str]:
    """Blame for an idle instant of ``step`` when the host was in no CUDA call: the innermost
    named range enclosing it (not the step's own; Python frames, with_stack, are left to the
    source-line view, `advisor.graph.source_lines`), else untraced host work.

    A step has a thousand such instants on a sync-heavy trace: the thread's range tree is
    looked up once and each range's label made once, not per instant (issue #17)."""
    starts, ranges, parents = graph.range_tree(step.pid, step.tid)
    step_name, python = step.name, RangeSource.PYTHON
    is_phase: dict[str, str | None] = {}
    labels: dict[int, str] = {}

    def cause(t: int) -> str:
        i = bisect_right(starts, t) - 1
        while i >= 0:
            r = ranges[i]
            if r.end_ns > t and r.name != step_name and r.source is not python:
                label = labels.get(i)
                if label is None:
                    name = operator_name(r.name)
                    label = labels[i] = name if len(name) <= 60 else name[:59] + "…"
                named = is_phase.get(label, "")
                if named == "":
                    named = is_phase[label] = phase_of(label)
                if named in RENAMED and any(a <= t < b for a, b in step.phases.get("data", ())):
                    # a position-named ``loss`` range whose content is data preparation
                    # (`advisor.graph.phase_content`): the phase it is
                    return "data"
                return label
            i = parents[i]
        return "host (untraced)"

    return cause


def _call_segments(calls: Sequence[ApiCall]) -> list[tuple[int, int, str]]:
    """Calls flattened into disjoint, sorted segments (an overlapping call keeps its tail)."""
    segs: list[tuple[int, int, str]] = []
    cur_end = -(2**62)
    for c in sorted(calls, key=lambda c: c.start_ns):
        s = max(c.start_ns, cur_end)
        if c.end_ns > s:
            segs.append((s, c.end_ns, c.name))
            cur_end = c.end_ns
    return segs


def _blame_gap(segs: list[tuple[int, int, str]], seg_starts: list[int], a: int, b: int,
               launched_at: int | None, host_cause: Callable[[int], str],
               out: list[tuple[int, int, str]]) -> None:
    """Split one GPU-idle gap [a, b) between the host calls and host work during it
    (``launched_at``: as `_launched_at` says of the gap's next op, asked once per gap)."""
    n = len(segs)
    i = max(0, bisect_right(seg_starts, a) - 1)
    t = a
    while t < b:
        while i < n and segs[i][1] <= t:
            i += 1
        s0, s1, name = segs[i] if i < n else (b, b, "")
        if i < n and s0 <= t:
            stop = s1 if s1 < b else b
            out.append((t, stop, name))
        else:
            stop = s0 if s0 < b else b
            cause = ("launch latency" if launched_at is not None and launched_at <= t
                     else host_cause(t))
            out.append((t, stop, cause))
        t = stop


def _step_window(step: Step) -> tuple[int, int]:
    g0 = step.gpu_start_ns if step.gpu_start_ns is not None else step.cpu_start_ns
    g1 = step.gpu_end_ns if step.gpu_end_ns is not None else step.cpu_end_ns
    return g0, g1


def _busy_and_gaps(graph: OpGraph, step: Step) -> tuple[list[GpuOp], int, list[tuple[int, int]]]:
    """The step's GPU ops, their busy time and the idle gaps inside the step's GPU interval."""
    g0, g1 = _step_window(step)
    ops = graph.ops_overlapping(step.pid, g0, g1)
    busy, gaps = union_length([(max(o.start_ns, g0), min(o.end_ns, g1)) for o in ops])
    if ops:
        first = min(o.start_ns for o in ops)
        last = max(o.end_ns for o in ops)
        if first > g0:
            gaps.insert(0, (g0, first))
        if last < g1:
            gaps.append((last, g1))
    else:
        gaps = [(g0, g1)] if g1 > g0 else []
    return ops, busy, gaps


def _blame_gaps(graph: OpGraph, step: Step, ops: list[GpuOp],
                gaps: list[tuple[int, int]]) -> list[tuple[int, int, str]]:
    g0, g1 = _step_window(step)
    calls = graph.calls_overlapping(step.pid, g0, g1)
    starts = sorted(ops, key=lambda o: o.start_ns)
    segs = _call_segments(calls)
    seg_starts = [x[0] for x in segs]
    host_cause = _host_causes(graph, step)
    out: list[tuple[int, int, str]] = []
    j = 0
    for a, b in gaps:
        while j < len(starts) and starts[j].start_ns < b:
            j += 1
        next_op = starts[j] if j < len(starts) else None
        _blame_gap(segs, seg_starts, a, b, _launched_at(graph, next_op), host_cause, out)
    return out


def idle_segments(graph: OpGraph, step: Step) -> list[tuple[int, int, str]]:
    """Every GPU-idle interval of a step as ``(start_ns, end_ns, cause)``, in time order.

    The same blame `breakdown` sums into ``idle_causes``, for views that draw the gaps.
    """
    ops, _, gaps = _busy_and_gaps(graph, step)
    return _blame_gaps(graph, step, ops, gaps)


def breakdown(graph: OpGraph, step: Step, projector: Projector) -> StepBreakdown:
    g0, g1 = _step_window(step)
    ops, busy, gaps = _busy_and_gaps(graph, step)
    causes: dict[str, int] = defaultdict(int)
    for a, b, cause in _blame_gaps(graph, step, ops, gaps):
        causes[cause] += b - a
    phases: dict[str, int] = {}
    for name, spans in step.phases.items():
        total = 0
        for s, e in spans:
            total += projector.gpu_time(step.pid, e) - projector.gpu_time(step.pid, s)
        phases[name] = total
    time_ns = step.time_ns
    return StepBreakdown(
        step=step,
        time_ns=time_ns,
        busy_ns=busy,
        idle_ns=max(0, (g1 - g0) - busy),
        idle_causes=dict(causes),
        phases=phases,
        kernels=sum(1 for o in ops if o.kind is GpuOpKind.KERNEL),
        api_calls=len(graph.api_calls_in(step.pid, step.tid, step.cpu_start_ns, step.cpu_end_ns)),
    )


@gc_paused()  # one breakdown per step: many small, acyclic objects (`advisor.gc_pause`)
def summarize(graph: OpGraph, steps: Sequence[Step], top: int = 15) -> Summary:
    projector = graph.projector
    rows = [breakdown(graph, s, projector) for s in steps]
    # keyed by category member, named (``.value``) once at the end: an enum's ``.value`` is a
    # descriptor call, and this loop runs once per GPU op of the window
    cat_ns: dict[KernelCategory, int] = defaultdict(int)
    per_kernel: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    kinds: dict[str, KernelCategory] = {}
    if steps:
        windows = [(s.gpu_start_ns or s.cpu_start_ns, s.gpu_end_ns or s.cpu_end_ns, s.pid)
                   for s in steps]
        lo = min(w[0] for w in windows)
        hi = max(w[1] for w in windows)
        pids = {w[2] for w in windows}
        for o in graph.gpu_ops:
            if o.pid in pids and lo <= o.start_ns < hi:
                cat = classify(o)
                cat_ns[cat] += o.duration_ns
                stat = per_kernel[o.name]
                kinds[o.name] = cat
                stat[0] += 1
                stat[1] += o.duration_ns
    n = max(1, len(steps))
    top_kernels = [
        KernelStat(short_name(name), kinds[name].value, c // n if c >= n else c, t // n)
        for name, (c, t) in sorted(per_kernel.items(), key=lambda kv: -kv[1][1])[:top]
    ]
    return Summary(
        steps=rows,
        all_step_times_ns=[s.time_ns for s in graph.steps],
        warmup_steps=sum(1 for s in graph.steps if s.warmup),
        category_ns={k.value: v // n for k, v in sorted(cat_ns.items(), key=lambda kv: -kv[1])},
        top_kernels=top_kernels,
    )


__all__ = ["StepBreakdown", "Summary", "idle_segments", "summarize"]
