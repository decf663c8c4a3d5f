"""What-if replay: apply a fix to the analysed steps and time them again.

This is HTA's critical-path idea ("modify the graph and re-run") done as a replay. The steady
steps of one process become a dependency graph whose nodes are event start and end points:

* host calls of the process form one chain in time order; the edge between two calls weighs the
  host work between them (Python, framework dispatch), and a call's own duration is an edge;
* ``launch`` edges: a GPU op starts no earlier than its launching call plus the launch latency;
* ``stream`` edges: an op starts no earlier than its stream predecessor ends (plus the gap seen);
* ``sync`` edges: a call that waited for the GPU ends no earlier than the op it waited for.

With the weights read off the trace the replay reproduces the observed timeline exactly; a fix
changes weights (a kernel gets shorter, a sync stops waiting, launches collapse into one graph
launch) and the replay says when each step now ends. Every edge points forward in observed time,
so observed start order is a topological order and one linear pass computes the longest paths.
We chose this pass over ``networkx.dag_longest_path`` because the order is already known and a
window holds 10^5 nodes; `advisor.graph.model.OpGraph.to_networkx` still gives the graph view.

Model constants are measured; each cites where.
"""

from __future__ import annotations

import statistics
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from advisor.graph.model import ApiCall, GpuOp, OpGraph, Step
from advisor.graph.syncs import host_waits

DEFAULT_LAUNCH_LATENCY_NS = 4_000
"""Fallback host-launch-to-kernel-start latency when the trace has no idle-stream launches to read
it from (H100, CUDA 13: 3-6 µs in our captures, fixtures/scenarios/uncaptured-cuda-graph/bad)."""

MAX_PLAUSIBLE_LAUNCH_NS = 50_000
"""A launch latency read off the trace above this means the GPU was always behind the host."""

GRAPH_LAUNCH_NS = 10_000
"""Host cost of one ``cudaGraphLaunch`` of a captured training step (measured:
fixtures/scenarios/uncaptured-cuda-graph/good and cpu-bound-loss/good, H100)."""

GRAPH_NODE_GAP_NS = 1_000
"""Gap between consecutive kernels of a replayed CUDA graph on one stream (measured median on
H100: fixtures/scenarios/uncaptured-cuda-graph/good)."""

OP_DISPATCH_NS = 8_000
"""Host time PyTorch's eager dispatch spends on one operator before its launch (Python binding,
dispatcher, TensorIterator setup), used when a trace shows no launches to read it from: 5-20 µs
on an H100 host. A fused-away kernel saves its launch and this dispatch."""

LONG_HOST_WORK_NS = 1_000_000
"""Host work between two CUDA calls longer than this is not launch overhead but computation the
step needs (data preparation, CPU-side logic): a CUDA graph replay does not remove it."""

SYNC_RETURN_NS = 1_500
"""A synchronizing call that finds the GPU already done still costs about this much."""

@dataclass(slots=True)
class _Node:
    """One host call, or a zero-length step marker, in the process's host chain."""

    obs_start: int
    obs_end: int
    dur: int
    call: ApiCall | None = None
    step: int | None = None  # index of the step this marker starts
    step_end: int | None = None  # index of the step this marker ends
    gap_from: int = 0  # observed start of the host work in ``gap`` (edits keep it)
    ops: list[int] = field(default_factory=list)
    wait_op: int | None = None
    wake: int = 0
    gap: int = 0  # host work since the chain's frontier ended
    overlap_from: int | None = None  # starts while node `overlap_from` is still running
    overlap_offset: int = 0
    graphed: bool = False
    graph_head: bool = False


@dataclass(slots=True)
class _Op:
    op: GpuOp
    stream: tuple[int, int]
    dur: int
    launch_lat: int
    stream_gap: int
    side: bool = False  # moved to a side stream; its time counts against the step period only
    graphed: bool = False
    removed: bool = False  # fused away: its time goes, the waits before it stay


@dataclass(frozen=True)
class Replay:
    """Per-step GPU-side periods of a replay, in ns."""

    periods: tuple[int, ...]

    @property
    def mean_ns(self) -> float:
        return statistics.fmean(self.periods) if self.periods else 0.0

    @property
    def median_ns(self) -> float:
        return statistics.median(self.periods) if self.periods else 0.0


class Simulation:
    """The steady steps of one process as a replayable dependency graph."""

    def __init__(self, graph: OpGraph, steps: Sequence[Step]) -> None:
        if not steps:
            raise ValueError("no steps to simulate")
        self.graph = graph
        self.steps = list(steps)
        pid = self.steps[0].pid
        self.pid = pid
        w0, w1 = self.steps[0].cpu_start_ns, self.steps[-1].cpu_end_ns
        calls = [a for a in graph.api_calls if a.pid == pid and w0 <= a.start_ns < w1]
        nodes = [_Node(a.start_ns, a.end_ns, a.end_ns - a.start_ns, call=a) for a in calls]
        nodes += [_Node(s.cpu_start_ns, s.cpu_start_ns, 0, step=i) for i, s in enumerate(self.steps)]
        nodes += [_Node(s.cpu_end_ns, s.cpu_end_ns, 0, step_end=i) for i, s in enumerate(self.steps)]
        # markers sort before calls starting at the same instant
        nodes.sort(key=lambda n: (n.obs_start, n.call is not None, n.step is not None))
        self.nodes = nodes
        self.node_of_call = {n.call.id: i for i, n in enumerate(nodes) if n.call is not None}
        self.ops: list[_Op] = []
        self.op_index: dict[int, int] = {}
        self._stream_free_at: dict[tuple[int, int], int] = {}
        self._link_chain()
        self._link_ops(w0)
        self._link_waits(calls)
        self.dispatch_ns = self._measure_dispatch()

    # ----- construction --------------------------------------------------------------------

    def _link_chain(self) -> None:
        frontier = None
        for i, n in enumerate(self.nodes):
            if frontier is not None:
                f = self.nodes[frontier]
                if n.obs_start < f.obs_end:
                    n.overlap_from, n.overlap_offset = frontier, n.obs_start - f.obs_start
                else:
                    n.gap, n.gap_from = n.obs_start - f.obs_end, f.obs_end
            if frontier is None or n.obs_end >= self.nodes[frontier].obs_end:
                frontier = i

    def _link_ops(self, w0: int) -> None:
        graph = self.graph
        launched: list[tuple[int, int, GpuOp]] = []
        for i, n in enumerate(self.nodes):
            if n.call is not None:
                for op in sorted(graph.launched(n.call), key=lambda o: o.start_ns):
                    launched.append((i, op.start_ns, op))
        # Streams already busy with work launched before the window (the GPU runs behind): ops
        # whose launch precedes the window or the trace, or that have no traced launch and run
        # on a stream ahead of the window's first op there, hold the stream until they end.
        in_window = {op.id for _, _, op in launched}
        first_in_window: dict[tuple[int, int], int] = {}
        for _, _, op in launched:
            key = (op.device, op.stream)
            first_in_window[key] = min(first_in_window.get(key, op.start_ns), op.start_ns)
        for op in graph.gpu_ops:
            if op.pid != self.pid or op.id in in_window:
                continue
            key = (op.device, op.stream)
            call = graph.launcher(op)
            if call is not None:
                backlog = call.start_ns < w0
            else:
                backlog = graph.launched_before_trace(op) or op.start_ns < first_in_window.get(key, w0)
            if backlog:
                self._stream_free_at[key] = max(self._stream_free_at.get(key, 0), op.end_ns)
        # Launch latency: the fastest launches are those that found their stream idle; when the
        # GPU never caught up with the host the trace cannot show it, and the default applies.
        lat = sorted(op.start_ns - self.nodes[i].obs_start for i, _, op in launched
                     if op.start_ns >= self.nodes[i].obs_start)
        p5 = lat[len(lat) // 20] if lat else None
        self.launch_latency = p5 if p5 is not None and p5 <= MAX_PLAUSIBLE_LAUNCH_NS \
            else DEFAULT_LAUNCH_LATENCY_NS
        last_end = dict(self._stream_free_at)
        for i, _, op in launched:
            key = (op.device, op.stream)
            call_start = self.nodes[i].obs_start
            pred_end = last_end.get(key)
            if pred_end is None or call_start + self.launch_latency > pred_end:
                launch_lat, gap = max(0, op.start_ns - call_start), 0
            else:
                launch_lat = min(self.launch_latency, max(0, op.start_ns - call_start))
                gap = max(0, op.start_ns - pred_end)
            self.op_index[op.id] = len(self.ops)
            self.nodes[i].ops.append(len(self.ops))
            self.ops.append(_Op(op, key, op.end_ns - op.start_ns, launch_lat, gap))
            last_end[key] = max(pred_end or 0, op.end_ns)

    def _link_waits(self, calls: Iterable[ApiCall]) -> None:
        for w in host_waits(self.graph, calls):
            idx = self.op_index.get(w.op.id)
            node = self.nodes[self.node_of_call[w.call.id]]
            if idx is None:  # waited for work launched before the window: keep it as observed
                continue
            node.wait_op = idx
            node.wake = max(0, node.obs_end - w.op.end_ns)
            node.dur = min(node.dur, max(node.wake, SYNC_RETURN_NS))

    def remove_profiler_overhead(self, calibration=None) -> None:
        """Take the tracing profiler's own host cost out of the timeline (the calibration
        detected from the trace unless one is given: `advisor.engine.profiler_cost`); the host
        work per launch is measured again after it."""
        from advisor.engine import profiler_cost

        self.calibration = calibration or profiler_cost.detect(self.graph)
        profiler_cost.remove(self, self.calibration)
        self.dispatch_ns = self._measure_dispatch()

    # ----- what-if edits (used by effects) ---------------------------------------------------

    def drop_ops(self, op_ids: Iterable[int], keep_fraction: float = 0.0) -> None:
        """Ops fused away (``keep_fraction`` 0) or made cheaper; a dropped op's launch goes too."""
        for op_id in op_ids:
            idx = self.op_index.get(op_id)
            if idx is None:
                continue
            o = self.ops[idx]
            o.dur = int(o.dur * keep_fraction)
            if keep_fraction == 0.0:
                o.removed = True
                call = self.graph.launcher(o.op)
                if call is not None and call.id in self.node_of_call:
                    node = self.nodes[self.node_of_call[call.id]]
                    if all(self.ops[j].removed for j in node.ops):
                        # the launch goes, and with it the framework's dispatch of the op
                        node.dur = 0
                        node.gap = max(0, node.gap - min(node.gap, self.dispatch_ns))

    def _measure_dispatch(self) -> int:
        """Host work per launch in this trace: the median host time before a kernel launch
        (framework dispatch and Python per op), read off the replay's own gaps once."""
        from advisor.graph.api_names import is_launch

        gaps = [n.gap for n in self.nodes if n.call is not None and is_launch(n.call.name)
                and 0 < n.gap < LONG_HOST_WORK_NS]
        return int(statistics.median(gaps)) if gaps else OP_DISPATCH_NS

    def set_op_durations(self, durations: dict[int, int]) -> None:
        for op_id, ns in durations.items():
            idx = self.op_index.get(op_id)
            if idx is not None:
                # two fixes of the same kernel (fused attention, FP8) do not compound: the
                # faster one wins
                self.ops[idx].dur = max(0, min(self.ops[idx].dur, int(ns)))

    def unwait(self, call_ids: Iterable[int]) -> None:
        """The calls no longer block the host (the sync is removed or made asynchronous)."""
        for cid in call_ids:
            i = self.node_of_call.get(cid)
            if i is not None:
                n = self.nodes[i]
                n.wait_op = None
                n.dur = min(n.dur, SYNC_RETURN_NS)

    def set_call_durations(self, durations: dict[int, int]) -> None:
        for cid, ns in durations.items():
            i = self.node_of_call.get(cid)
            if i is not None:
                self.nodes[i].dur = max(0, int(ns))
                self.nodes[i].wait_op = None

    def scale_host_gaps(self, intervals: Iterable[tuple[int, int]], factor: float) -> None:
        """Host work inside the intervals (between calls) takes ``factor`` of its time.

        A gap is the host work between the chain's frontier and a call; only the part of it that
        lies inside an interval is scaled (a data phase without CUDA calls is one long gap that
        ends at the first call after it).
        """
        spans = sorted(intervals)
        for n in self.nodes:
            if n.overlap_from is not None:
                a0, b0 = self.nodes[n.overlap_from].obs_start, n.obs_start
                cut = sum(max(0, min(b0, b) - max(a0, a)) for a, b in spans)
                n.overlap_offset -= int(cut * (1 - factor))
                continue
            if n.gap <= 0:
                continue
            g0, g1 = n.gap_from, n.obs_start
            cut = sum(max(0, min(g1, b) - max(g0, a)) for a, b in spans)
            n.gap = max(0, n.gap - int(cut * (1 - factor)))

    def to_side_stream(self, op_ids: Iterable[int], durations: dict[int, int] | None = None) -> None:
        """Ops overlap the step on another stream (a prefetched copy) and stop blocking their
        launching call; their time still bounds the step period from below."""
        for op_id in op_ids:
            idx = self.op_index.get(op_id)
            if idx is None:
                continue
            o = self.ops[idx]
            o.side = True
            if durations and op_id in durations:
                o.dur = int(durations[op_id])
            call = self.graph.launcher(o.op)
            if call is not None and call.id in self.node_of_call:
                n = self.nodes[self.node_of_call[call.id]]
                if n.wait_op == idx:
                    n.wait_op = None
                n.dur = min(n.dur, SYNC_RETURN_NS)

    def capture_graph(self, intervals: Iterable[tuple[int, int]],
                      launch_ns: int = GRAPH_LAUNCH_NS, node_gap_ns: int = GRAPH_NODE_GAP_NS) -> None:
        """Host intervals (one per step) become one CUDA graph replay each: the host pays one
        graph launch, kernels follow each other at the graph's node gap, host waits inside go."""
        starts = [n.obs_start for n in self.nodes]  # nodes are in observed start order
        for a, b in sorted(intervals):
            head = None
            for i in range(bisect_left(starts, a), bisect_left(starts, b)):
                n = self.nodes[i]
                if n.call is None:
                    continue
                n.graphed = True
                n.wait_op = None
                if head is None:
                    head = i
                    n.graph_head = True
                    n.dur = launch_ns
                else:
                    n.dur = 0
                    # Per-launch host work (dispatch, Python between ops) is not replayed; a long
                    # stretch of host work is something the step computes, and stays.
                    if n.gap < LONG_HOST_WORK_NS:
                        n.gap = 0
                    n.overlap_offset = 0
                for j in n.ops:
                    o = self.ops[j]
                    o.graphed = True
                    # a launch-bound kernel now follows its predecessor at the graph's node gap;
                    # a gap the GPU itself showed (a wait on another stream) stays
                    if o.stream_gap == 0:
                        o.stream_gap = node_gap_ns
                    o.launch_lat = self.launch_latency
            # Kernels of a graph become ready when the graph launch is issued.
            if head is not None:
                for n in self.nodes[head:]:
                    if n.obs_start >= b:
                        break
                    if n.graphed:
                        n.overlap_from = None

    # ----- replay ------------------------------------------------------------------------------

    def run(self) -> Replay:
        nodes, ops = self.nodes, self.ops
        start = [0] * len(nodes)
        end = [0] * len(nodes)
        op_end = [0] * len(ops)
        stream_free = dict(self._stream_free_at)
        carry: dict[tuple[int, int], int] = {}
        # max end of any op launched so far (the GPU-side projection), starting with the work
        # launched before the window that the GPU was still running
        latest_end_launched = max(self._stream_free_at.values(), default=0)
        starts_at = [0] * len(self.steps)
        ends_at = [0] * len(self.steps)
        side_time = [0] * (len(self.steps) + 1)
        current_step = 0
        frontier, frontier_obs_end = -1, -(2**62)
        graph_head_start = None
        t0 = nodes[0].obs_start
        for i, n in enumerate(nodes):
            if frontier < 0:
                s = t0
            elif n.overlap_from is not None and n.overlap_from >= 0:
                s = start[n.overlap_from] + n.overlap_offset
            else:
                s = end[frontier] + n.gap
            if n.step is not None:
                starts_at[n.step] = max(s, latest_end_launched)
                current_step = n.step
            if n.step_end is not None:
                ends_at[n.step_end] = max(s, latest_end_launched)
            if n.graph_head:
                graph_head_start = s
            e = s + n.dur
            launch_base = graph_head_start if (n.graphed and graph_head_start is not None) else s
            for j in n.ops:
                o = ops[j]
                if o.side or o.removed:
                    # The op leaves this stream, but a wait before it (a cross-stream event
                    # the gap encodes) still holds back whatever follows it on the stream, and
                    # a host sync that waited for it now waits for the stream up to its place.
                    carry[o.stream] = carry.get(o.stream, 0) + o.stream_gap
                    if o.side:
                        side_time[min(current_step, len(self.steps) - 1)] += o.dur
                    free = stream_free.get(o.stream)
                    place = launch_base + o.launch_lat
                    if free is not None:
                        place = max(place, free + carry[o.stream])
                    op_end[j] = place
                    continue
                free = stream_free.get(o.stream)
                os_ = launch_base + o.launch_lat
                if free is not None:
                    os_ = max(os_, free + o.stream_gap + carry.pop(o.stream, 0))
                op_end[j] = os_ + o.dur
                stream_free[o.stream] = op_end[j]
                latest_end_launched = max(latest_end_launched, op_end[j])
            if n.wait_op is not None:
                e = max(e, op_end[n.wait_op] + n.wake)
            start[i], end[i] = s, e
            if n.obs_end >= frontier_obs_end:
                frontier, frontier_obs_end = i, n.obs_end
        self.replayed = (start, end, op_end)  # kept for inspection (tests, timelines)
        periods = []
        for k in range(len(self.steps)):
            periods.append(max(ends_at[k] - starts_at[k], side_time[k]))
        return Replay(tuple(periods))

