"""The representative step as compact data for the HTML report's timeline.

One step is drawn, not the trace: the analysed step whose time is closest to the median, so the
picture shows the typical step the findings talk about. Its window spans the step's CPU interval
and its GPU interval (the GPU usually trails the host). Lanes are the step's host threads (phases,
nested ranges, CUDA API calls), the GPU's idle gaps coloured by their cause (the blame of
`advisor.graph.step_breakdown.idle_segments`, so the picture and the idle table agree) and one lane per
GPU stream.

What is embedded is capped (`Caps`) so that a huge trace still gives a report of a few MB: beyond
the caps the shortest GPU ops are merged into blocks, and the deepest or shortest ranges, calls
and gaps are dropped; every trim is listed in ``trimmed`` and shown under the picture.

Events are arrays ``[start, dur, name, cls, id, link, count, flags]``: times in ns relative to
the window start, ``name`` an index into ``names``, ``cls`` an index into ``classes`` (colour
class keys of `advisor.report.palette`), ``id`` the graph node id (-1 for none), ``link`` the
launching API call's id for GPU ops (-1 otherwise), ``count`` > 1 for merged blocks, ``flags``
bit 0 set for GPU work launched outside the step.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from advisor.analysis import Analysis
from advisor.graph.kernels import classify, short_name
from advisor.graph.model import ApiCall, CpuRange, GpuOp, OpGraph, RangeSource, Step
from advisor.graph.step_breakdown import StepBreakdown, Summary, idle_segments
from advisor.report import palette
from advisor.report.units import fmt_ns

OUTSIDE_STEP = 1


@dataclass(frozen=True)
class Caps:
    """Upper bounds on what one report embeds (each event costs ~50 bytes of HTML)."""

    gpu_ops: int = 6000
    ranges: int = 5000
    api_calls: int = 4000
    gaps: int = 4000
    range_depth: int = 8
    threads: int = 6
    name_chars: int = 400
    margin: float = 0.015  # of the window, each side, so edge events are visible


def representative_step(summary: Summary) -> StepBreakdown | None:
    """The analysed step closest to the median step time (earliest on ties)."""
    if not summary.steps:
        return None
    median = summary.median_step_ns
    return min(summary.steps, key=lambda b: (abs(b.time_ns - median), b.step.cpu_start_ns))


class _Table:
    """Interns strings so that each name is embedded once."""

    def __init__(self, limit: int | None = None) -> None:
        self.items: list[str] = []
        self._index: dict[str, int] = {}
        self._limit = limit

    def __call__(self, text: str) -> int:
        if self._limit is not None and len(text) > self._limit:
            text = text[: self._limit - 1] + "…"
        i = self._index.get(text)
        if i is None:
            i = self._index[text] = len(self.items)
            self.items.append(text)
        return i


@dataclass
class _Lane:
    group: int
    title: str
    kind: str  # step | phase | range | api | idle | gpu
    events: list[list[int]]

    def as_dict(self) -> dict[str, Any]:
        return {"group": self.group, "title": self.title, "kind": self.kind, "ev": self.events}


class _Builder:
    def __init__(self, graph: OpGraph, breakdown: StepBreakdown, caps: Caps,
                 pinned: set[str]) -> None:
        self.graph: OpGraph = graph
        self.pinned = pinned
        self.step: Step = breakdown.step
        self.breakdown = breakdown
        self.caps = caps
        s = self.step
        gpu0 = s.gpu_start_ns if s.gpu_start_ns is not None else s.cpu_start_ns
        gpu1 = s.gpu_end_ns if s.gpu_end_ns is not None else s.cpu_end_ns
        lo, hi = min(s.cpu_start_ns, gpu0), max(s.cpu_end_ns, gpu1)
        pad = max(1, int((hi - lo) * caps.margin))
        self.w0, self.w1 = lo - pad, hi + pad
        self.names = _Table(caps.name_chars)
        self.classes = _Table()
        self.groups: list[dict[str, str]] = []
        self.lanes: list[_Lane] = []
        self.trims: Counter[str] = Counter()  # message with {n} -> how many, over all threads
        self.class_ns: Counter[str] = Counter()

    # ----- helpers -------------------------------------------------------------------------

    def ev(self, start: int, end: int, name: str, cls: str, node_id: int = -1, link: int = -1,
           count: int = 1, flags: int = 0) -> list[int]:
        s = max(start, self.w0) - self.w0
        e = min(end, self.w1) - self.w0
        return [s, max(0, e - s), self.names(name), self.classes(cls), node_id, link, count, flags]

    def group(self, title: str, sub: str = "") -> int:
        self.groups.append({"title": title, "sub": sub})
        return len(self.groups) - 1

    def lane(self, group: int, title: str, kind: str, events: list[list[int]]) -> None:
        if events:
            self.lanes.append(_Lane(group, title, kind, events))

    # ----- lanes ---------------------------------------------------------------------------

    def step_lane(self) -> None:
        s = self.step
        g = self.group(f"Step {s.index}", s.name)
        cpu = f"{s.name} on the host · {fmt_ns(s.cpu_ns)}"
        self.lane(g, "host", "step", [self.ev(s.cpu_start_ns, s.cpu_end_ns, cpu, "step-cpu")])
        if s.gpu_start_ns is not None and s.gpu_end_ns is not None:
            gpu = f"{s.name} on the GPU · {fmt_ns(s.gpu_end_ns - s.gpu_start_ns)}"
            self.lane(g, "GPU", "step", [self.ev(s.gpu_start_ns, s.gpu_end_ns, gpu, "step-gpu")])

    def _threads(self) -> list[int]:
        """Threads of the step's process with host events in the window, step thread first."""
        pid = self.step.pid
        counts: Counter[int] = Counter()
        for items in (self.graph.ranges, self.graph.api_calls):
            lo, hi = _bisect_start(items, self.w0), _bisect_start(items, self.w1)
            counts.update(x.tid for x in items[lo:hi] if x.pid == pid)
        counts[self.step.tid] += 1
        ordered = [self.step.tid] + [t for t, _ in counts.most_common() if t != self.step.tid]
        if len(ordered) > self.caps.threads:
            self.trims["{n} more host threads not drawn"] += len(ordered) - self.caps.threads
        return ordered[: self.caps.threads]

    def cpu_lanes(self) -> None:
        pid = self.step.pid
        threads = self._threads()
        nested = {tid: self._nested(self._ranges(pid, tid)) for tid in threads}
        calls = {tid: self.graph.api_calls_in(pid, tid, self.w0, self.w1) for tid in threads}
        range_caps = fair_shares([len(nested[t]) for t in threads], self.caps.ranges)
        api_caps = fair_shares([len(calls[t]) for t in threads], self.caps.api_calls)
        for tid, range_cap, api_cap in zip(threads, range_caps, api_caps):
            title = self.graph.info.threads.get((pid, tid), f"thread {tid}")
            main = tid == self.step.tid
            g = self.group("CPU", title + (" · step thread" if main else ""))
            if main and self.step.phases:
                phases = [self.ev(s, e, name, palette.phase_class(name))
                          for name, spans in self.step.phases.items() for s, e in spans]
                self.lane(g, "phases", "phase", sorted(phases))
            for depth, rows in enumerate(self._range_rows(nested[tid], range_cap)):
                self.lane(g, "ranges" if depth == 0 else "", "range", rows)
            self.lane(g, "CUDA API", "api", self._api_row(calls[tid], api_cap))

    def _ranges(self, pid: int, tid: int) -> list[CpuRange]:
        seen: set[int] = set()
        out: list[CpuRange] = []
        for r in self.graph.ranges_at(pid, tid, self.w0) + self.graph.ranges_in(pid, tid, self.w0, self.w1):
            if r.id not in seen and r.end_ns > self.w0:
                seen.add(r.id)
                out.append(r)
        out.sort(key=lambda r: (r.start_ns, -r.end_ns))
        python = sum(1 for r in out if r.source is RangeSource.PYTHON)
        if python and python < len(out) and len(out) > self.caps.ranges // 2:
            # Python stacks (with_stack=True) outnumber operators tenfold and bury them.
            self.trims["{n} Python function ranges not drawn (operators and annotations kept)"] += python
            out = [r for r in out if r.source is not RangeSource.PYTHON]
        return out

    def _nested(self, ranges: list[CpuRange]) -> list[tuple[CpuRange, int]]:
        """Ranges (sorted by start, outer first) with their nesting depth; the too deep dropped."""
        stack: list[int] = []
        out: list[tuple[CpuRange, int]] = []
        too_deep = 0
        for r in ranges:
            while stack and stack[-1] <= r.start_ns:
                stack.pop()
            depth = len(stack)
            stack.append(r.end_ns)
            if depth >= self.caps.range_depth:
                too_deep += 1
            else:
                out.append((r, depth))
        if too_deep:
            deep = f"{{n}} host ranges nested deeper than {self.caps.range_depth} levels not drawn"
            self.trims[deep] += too_deep
        return out

    def _range_rows(self, nested: list[tuple[CpuRange, int]], budget: int) -> list[list[list[int]]]:
        """Event rows by depth; over budget, the shortest ranges are dropped."""
        if len(nested) > budget:
            keep = sorted(nested, key=lambda x: -x[0].duration_ns)[:budget]
            self.trims["{n} shortest host ranges not drawn"] += len(nested) - len(keep)
            nested = sorted(keep, key=lambda x: (x[0].start_ns, -x[0].end_ns))
        rows: list[list[list[int]]] = []
        for r, depth in nested:
            while len(rows) <= depth:
                rows.append([])
            rows[depth].append(self.ev(r.start_ns, r.end_ns, r.name, palette.range_class(r.name), r.id))
        return rows

    def _api_row(self, calls: list[ApiCall], budget: int) -> list[list[int]]:
        if len(calls) > budget:
            # Syncs, copies and allocations explain idle time: keep them before launches.
            ranked = sorted(calls, key=lambda c: (f"api:{c.id}" not in self.pinned,
                                                  palette.api_class(c.name) in ("launch", "other"),
                                                  -c.duration_ns))
            self.trims["{n} shortest CUDA API calls not drawn"] += len(calls) - budget
            calls = sorted(ranked[:budget], key=lambda c: c.start_ns)
        return [self.ev(c.start_ns, c.end_ns, c.name, "api-" + palette.api_class(c.name), c.id)
                for c in calls]

    def idle_lane(self, group: int) -> None:
        segs = _merge_touching(idle_segments(self.graph, self.step))
        for a, b, cause in segs:
            self.class_ns["idle-" + palette.idle_class(cause)] += b - a
        if len(segs) > self.caps.gaps:
            self.trims["{n} shortest idle gaps not drawn"] += len(segs) - self.caps.gaps
            segs = sorted(sorted(segs, key=lambda x: x[0] - x[1])[: self.caps.gaps])
        events = [self.ev(a, b, cause, "idle-" + palette.idle_class(cause)) for a, b, cause in segs]
        self.lane(group, "idle · why", "idle", events)

    def gpu_lanes(self) -> None:
        pid = self.step.pid
        per_stream: dict[tuple[int, int], list[GpuOp]] = {}
        for key, ops in self.graph.streams.items():
            chosen = [o for o in _overlapping(ops, self.w0, self.w1) if o.pid == pid]
            if chosen:
                per_stream[key] = chosen
        gpu_names = {x.device: x.name for x in self.graph.info.gpus}
        devices = sorted({d for d, _ in per_stream}) or [0]
        keep = _keep_longest(per_stream, self.caps.gpu_ops, self.pinned)
        groups = {d: self.group(f"GPU {d}", gpu_names.get(d, "")) for d in devices}
        self.idle_lane(groups[devices[0]])
        merged_total = 0
        min_gap = (self.w1 - self.w0) // 4000
        for (device, stream), ops in sorted(per_stream.items()):
            events: list[list[int]] = []
            run: list[GpuOp] = []
            for op in ops:
                cat = "k-" + classify(op).value
                self.class_ns[cat] += op.duration_ns
                if keep is None or op.id in keep:
                    if run:
                        events.append(self._merged(run))
                        merged_total += len(run)
                        run = []
                    call = self.graph.launcher(op)
                    flags = OUTSIDE_STEP if call is not None and not self._launched_in_step(call) else 0
                    events.append(self.ev(op.start_ns, op.end_ns, op.name, cat, op.id,
                                          call.id if call else -1, 1, flags))
                else:
                    if run and op.start_ns - max(o.end_ns for o in run) > min_gap:
                        events.append(self._merged(run))
                        merged_total += len(run)
                        run = []
                    run.append(op)
            if run:
                events.append(self._merged(run))
                merged_total += len(run)
            self.lane(groups[device], f"stream {stream}", "gpu", events)
        if merged_total:
            self.trims["{n} shortest GPU ops merged into blocks (over the cap of "
                       f"{self.caps.gpu_ops:,} drawn one by one)"] += merged_total

    def _launched_in_step(self, call: ApiCall) -> bool:
        """Launched by any thread of the step's process during the step (autograd's backward
        thread launches half the step's kernels)."""
        s = self.step
        return call.pid == s.pid and s.cpu_start_ns <= call.start_ns < s.cpu_end_ns

    def _merged(self, run: list[GpuOp]) -> list[int]:
        by_cat: Counter[str] = Counter()
        for o in run:
            by_cat["k-" + classify(o).value] += o.duration_ns
        cat = by_cat.most_common(1)[0][0]
        end = max(o.end_ns for o in run)
        if len(run) == 1:
            return self.ev(run[0].start_ns, end, run[0].name, cat, run[0].id)
        return self.ev(run[0].start_ns, end, f"{len(run)} short GPU ops (merged)", cat, -1, -1, len(run))

    # ----- result --------------------------------------------------------------------------

    def build(self) -> dict[str, Any]:
        self.step_lane()
        self.cpu_lanes()
        self.gpu_lanes()
        s, b = self.step, self.breakdown
        used = sorted({lane.group for lane in self.lanes})
        renumber = {g: i for i, g in enumerate(used)}
        groups = [self.groups[g] for g in used]
        lanes = [{**lane.as_dict(), "group": renumber[lane.group]} for lane in self.lanes]

        def rel(t: int | None) -> int | None:
            return None if t is None else t - self.w0

        return {
            "step": {
                "index": s.index,
                "name": s.name,
                "time_ns": b.time_ns,
                "busy_ns": b.busy_ns,
                "idle_ns": b.idle_ns,
                "cpu": [rel(s.cpu_start_ns), rel(s.cpu_end_ns)],
                "gpu": [rel(s.gpu_start_ns), rel(s.gpu_end_ns)],
            },
            "origin_ns": self.w0,  # trace clock: event times are relative to it
            "span_ns": self.w1 - self.w0,
            "groups": groups,
            "lanes": lanes,
            "names": self.names.items,
            "classes": self.classes.items,
            "trimmed": [msg.format(n=f"{n:,}") for msg, n in self.trims.items()],
            "class_ns": dict(self.class_ns.most_common()),
        }


def fair_shares(demands: list[int], budget: int) -> list[int]:
    """Split a budget so that no one gets more than it asks and what the small leave goes to
    the large (water-filling): one busy thread must not starve a quiet one, nor the reverse."""
    shares = [0] * len(demands)
    left = budget
    order = sorted(range(len(demands)), key=lambda i: demands[i])
    for k, i in enumerate(order):
        shares[i] = min(demands[i], left // (len(order) - k))
        left -= shares[i]
    return shares


def _bisect_start(items: list[Any], t: int) -> int:
    lo, hi = 0, len(items)
    while lo < hi:
        mid = (lo + hi) // 2
        if items[mid].start_ns < t:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _overlapping(ops: list[GpuOp], w0: int, w1: int) -> list[GpuOp]:
    """Ops of one stream (sorted by start) that overlap [w0, w1)."""
    lo = _bisect_start(ops, w0)
    hi = _bisect_start(ops, w1)
    # Ops on a stream barely overlap, so one that started before w0 is among the last few.
    head = [o for o in ops[max(0, lo - 8):lo] if o.end_ns > w0]
    return head + ops[lo:hi]


def _keep_longest(per_stream: dict[tuple[int, int], list[GpuOp]], cap: int,
                  pinned: set[str]) -> set[int] | None:
    """Ids of the ops drawn one by one: those findings cite, then the longest; None for all."""
    total = sum(len(v) for v in per_stream.values())
    if total <= cap:
        return None
    ranked = sorted((o for ops in per_stream.values() for o in ops),
                    key=lambda o: (f"gpu:{o.id}" not in pinned, -o.duration_ns))
    return {o.id for o in ranked[:cap]}


def _merge_touching(segs: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Adjacent idle segments with the same cause as one."""
    out: list[tuple[int, int, str]] = []
    for a, b, cause in segs:
        if out and out[-1][2] == cause and out[-1][1] == a:
            out[-1] = (out[-1][0], b, cause)
        else:
            out.append((a, b, cause))
    return out


def build_timeline(analysis: Analysis, caps: Caps | None = None) -> dict[str, Any] | None:
    """The timeline data of the representative step, or None when no step was analysed.

    GPU ops and API calls that findings cite as evidence are always drawn one by one, so a
    finding can point at them.
    """
    breakdown = representative_step(analysis.summary)
    if breakdown is None:
        return None
    pinned = {n for f in analysis.results.findings for n in f.evidence.node_ids}
    return step_timeline(analysis.graph, breakdown, caps, pinned)


def step_timeline(graph: OpGraph, breakdown: StepBreakdown, caps: Caps | None = None,
                  pinned: set[str] | None = None) -> dict[str, Any]:
    """The timeline data of one step of ``graph`` (the job page draws two ranks' steps with it,
    `advisor.report.job_timeline`); ``pinned``: event keys always drawn one by one."""
    return _Builder(graph, breakdown, caps or Caps(), pinned or set()).build()


def cited_events(timeline: dict[str, Any] | None, graph: OpGraph, evidence: dict[str, Any]) -> list[str]:
    """Keys (``gpu:ID``, ``api:ID``, ``range:ID``) of the drawn events a finding points at.

    A finding cites a sample of node ids from all analysed steps, which may miss the step
    drawn; it also names kernels, ranges and API calls, so events of the drawn step with those
    names count too.
    """
    if not timeline:
        return []
    nodes = set(evidence.get("node_ids", ()))
    named = {"gpu": set(evidence.get("kernels", ())), "api": set(evidence.get("api_calls", ())),
             "range": set(evidence.get("ranges", ()))}
    ops = {o.id: o for o in graph.gpu_ops} if named["gpu"] else {}
    keys: list[str] = []
    for lane in timeline["lanes"]:
        kind = lane["kind"]
        if kind not in named:
            continue
        for e in lane["ev"]:
            if e[4] < 0:
                continue
            key = f"{kind}:{e[4]}"
            name = timeline["names"][e[2]]
            if kind == "gpu" and e[4] in ops:
                name = short_name(ops[e[4]].name)
            if key in nodes or (name in named[kind] and not e[7] & OUTSIDE_STEP):
                keys.append(key)
    return keys
