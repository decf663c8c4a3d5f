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
window holds 10^5 nodes (networkx does the cross-rank critical path, `advisor.job.model`).

Model constants are measured; each cites where.
"""

from __future__ import annotations

import copy
import statistics
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from advisor.graph.model import ApiCall, GpuOp, OpGraph, Step
from advisor.graph.syncs import host_waits

if TYPE_CHECKING:
    import numpy as np

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

HOST_COMPUTE_OP_NS = 50_000
"""A framework operator that runs this long on the host without launching any GPU work is
computing on the CPU (CPU tensors, host-side preprocessing), not dispatching: eager dispatch of
an operator that launches nothing (a view, a reshape, an empty) costs single-digit µs. A CUDA
graph does not replay such an operator's work, so its time stays in a graph-captured step."""

LONG_HOST_WORK_NS = 1_000_000
"""Host work between two CUDA calls longer than this is not launch overhead but computation the
step needs (data preparation, CPU-side logic): a CUDA graph replay does not remove it."""

SYNC_RETURN_NS = 1_500
"""A synchronizing call that finds the GPU already done still costs about this much."""

SETTLE_TOL = 0.005
"""A replay has settled when another pass of the window would start from the same GPU queues,
or repeats the last pass's step periods, within this share of the mean period (0.5%: under
the 2% a finding must save, `advisor.engine.runner.MIN_SPEEDUP`)."""

MAX_SETTLE_PASSES = 6
"""Passes of the window before a replay that has not settled is given up as drifting (a queue
that grows without end in a GPU-bound loop repeats its periods from the second pass)."""

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
    ops: list[int] | tuple[()] = ()  # its ops (`_link_ops`); most nodes launch none: no list
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


def _fixed(name: str) -> property:
    """A view's field that no what-if changes: read from the entry built at construction."""
    return property(lambda self: getattr(self._e.base[self._i], name))


def _column(name: str, optional: bool = False) -> property:
    """A view's field stored in its simulation's column ``name`` (-1 stands for None)."""
    if optional:
        def get(self):
            v = getattr(self._e.cols, name)[self._i]
            return None if v < 0 else v

        def put(self, v) -> None:
            self._e.cols.own(name)[self._i] = -1 if v is None else v
    else:
        def get(self):
            return getattr(self._e.cols, name)[self._i]

        def put(self, v) -> None:
            self._e.cols.own(name)[self._i] = v
    return property(get, put)


class _View:
    """Entry ``i`` of a sealed simulation: changeable fields live in the columns (descriptors
    of the subclass), the rest in the object built at construction, shared read-only."""

    __slots__ = ("_e", "_i")

    def __init__(self, entries: _Entries, i: int) -> None:
        self._e, self._i = entries, i

    def __getattr__(self, name: str):
        return getattr(self._e.base[self._i], name)


class _NodeView(_View):
    """Node ``i`` of a sealed simulation (``call``, ``obs_start``, ``ops``... fixed)."""

    __slots__ = ()
    dur = _column("dur")
    gap = _column("gap")
    gap_from = _column("gap_from")
    overlap_from = _column("overlap_from", optional=True)
    overlap_offset = _column("overlap_offset")
    wait_op = _column("wait_op", optional=True)
    wake = _column("wake")
    graphed = _column("graphed")
    graph_head = _column("graph_head")
    call = _fixed("call")
    ops = _fixed("ops")
    obs_start = _fixed("obs_start")
    obs_end = _fixed("obs_end")


class _OpView(_View):
    """Op ``i`` of a sealed simulation (``op``, ``stream`` fixed)."""

    __slots__ = ()
    dur = _column("op_dur")
    launch_lat = _column("op_lat")
    stream_gap = _column("op_gap")
    side = _column("op_side")
    graphed = _column("op_graphed")
    removed = _column("op_removed")
    op = _fixed("op")
    stream = _fixed("stream")


class _Built(list):
    """Nodes or ops of a simulation not sealed yet: plain objects, changed in place."""

    def edit(self, i: int):
        return self[i]


class _Entries:
    """A sealed simulation's nodes (or ops) as its edit methods see them: ``entries[i]`` is a
    view whose changeable fields read and write the simulation's own columns, copy-on-write.

    A what-if (`Simulation.fork`) so shares the template's nodes, ops and columns, and pays only
    for the columns it changes; nothing it does reaches the template (issue #17: this replaces
    copying every node and op per what-if).
    """

    __slots__ = ("base", "cols", "view")

    def __init__(self, base: list, cols: _Columns, view: type) -> None:
        self.base, self.cols, self.view = base, cols, view

    def __len__(self) -> int:
        return len(self.base)

    def __getitem__(self, i: int):
        return self.view(self, i)

    def __iter__(self):
        return (self.view(self, i) for i in range(len(self.base)))

    def edit(self, i: int):
        """Entry ``i`` to change (the same view: writes go to this simulation's columns)."""
        return self.view(self, i)


@dataclass(frozen=True)
class Replay:
    """Per-step GPU-side periods of a replay, in ns, once settled (`Simulation.run`):
    ``settled`` False when the passes ran out before two agreed (the periods are then the
    last pass's, still drifting); ``passes`` how many were replayed."""

    periods: tuple[int, ...]
    settled: bool = True
    passes: int = 1

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
        self._cols: _Columns | None = None  # set once sealed (`_seal`)
        pid = self.steps[0].pid
        self.pid = pid
        w0, w1 = self.steps[0].cpu_start_ns, self.steps[-1].cpu_end_ns
        starts = graph._call_starts[0]  # calls are sorted by start: bisect to the window
        calls = [a for a in graph.api_calls[bisect_left(starts, w0):bisect_left(starts, w1)]
                 if a.pid == pid]
        markers = [_Node(s.cpu_start_ns, s.cpu_start_ns, 0, step=i) for i, s in enumerate(self.steps)]
        markers += [_Node(s.cpu_end_ns, s.cpu_end_ns, 0, step_end=i) for i, s in enumerate(self.steps)]
        markers.sort(key=lambda n: (n.obs_start, n.step is not None))  # an end before a start
        self.nodes = _Built(_merged(markers, calls))
        nodes = self.nodes
        self.node_of_call = {n.call.id: i for i, n in enumerate(nodes) if n.call is not None}
        self.ops: list[_Op] = _Built()
        self.op_index: dict[int, int] = {}
        self._stream_free_at: dict[tuple[int, int], int] = {}
        self._link_chain()
        self._link_ops(w0)
        self._link_waits(calls)
        self.lead_ins = self._profiler_lead_ins()
        self.dispatch_ns = self._measure_dispatch()
        self._host_compute_cache: list[tuple[int, int]] | None = None
        _ = self._host_compute_spans  # computed once here, shared by every clone
        # Facts derived from the trace alone, filled on first use and shared with every fork
        # (a fork is a shallow copy): `capture_graph` asks them of every node, once per what-if.
        self._derived: dict[str, object] = {}

    def _seal(self) -> _Columns:
        """From here on the changeable fields live in flat columns (what `run` reads) and the
        nodes and ops are views of them; until then they are plain objects (cheap to build)."""
        if self._cols is None:
            self._cols = _Columns.of(self.nodes, self.ops, self._stream_keys())
            self.nodes = _Entries(self.nodes, self._cols, _NodeView)  # type: ignore[assignment]
            self.ops = _Entries(self.ops, self._cols, _OpView)  # type: ignore[assignment]
        return self._cols

    def seal(self) -> _Columns:
        """`_seal` for the engine's modules that edit a simulation column by column
        (`profiler_cost.remove`): the columns are built once, and a replay before the edits
        reads the same ones (the recorded replay, then the template: `RuleContext`)."""
        return self._seal()

    def fork(self) -> Simulation:
        """A what-if on this simulation: it shares the nodes, ops and columns, and copies a
        column only when it first changes it, so forking costs nothing and edits to either
        side never reach the other."""
        cols = self._seal().fork()
        new = copy.copy(self)
        new._cols = cols
        new.nodes = _Entries(self.nodes.base, cols, _NodeView)
        new.ops = _Entries(self.ops.base, cols, _OpView)
        return new

    def changed(self) -> bool:
        """Has this what-if changed anything since it was forked (or built)? Every edit goes
        through a column it then owns (`_Columns.own`)."""
        return self._cols is None or bool(self._cols.owned)

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
        """Each launched op joins the simulation, tied to its launching node, with its launch
        latency and the gap its stream showed before it. Built once per analysis, over every
        call and op of the window: attribute reads are hoisted and the launch latencies gathered
        in the same pass as the launches."""
        graph, nodes, pid = self.graph, self.nodes, self.pid
        get_ops = graph.ops_by_correlation.get  # `graph.launched`, once per node of the window
        launcher = graph.api_by_correlation.get  # a reused id links no ops (`OpGraph.launched`)
        launched: list[tuple[int, GpuOp]] = []
        lat: list[int] = []  # launch to start, where not negative (the launch latency, below)
        for i, n in enumerate(nodes):
            call = n.call
            if call is not None:
                key = (call.pid, call.correlation)
                ops = get_ops(key)
                if ops and launcher(key) is call:
                    if len(ops) > 1:
                        ops = sorted(ops, key=lambda o: o.start_ns)
                    for op in ops:
                        launched.append((i, op))
                        d = op.start_ns - n.obs_start
                        if d >= 0:
                            lat.append(d)
        # Streams already busy with work launched before the window (the GPU runs behind): ops
        # whose launch precedes the window or the trace, or that have no traced launch and run
        # on a stream ahead of the window's first op there, hold the stream until they end.
        in_window = {op.id for _, op in launched}
        first_in_window: dict[tuple[int, int], int] = {}
        for _, op in launched:
            key = (op.device, op.stream)
            t = first_in_window.get(key)
            if t is None or op.start_ns < t:
                first_in_window[key] = op.start_ns
        stream_free_at = self._stream_free_at
        for op in graph.gpu_ops:
            if op.pid != pid or op.id in in_window:
                continue
            key = (op.device, op.stream)
            call = graph.launcher(op)
            if call is not None:
                backlog = call.start_ns < w0
            else:
                backlog = graph.launched_before_trace(op) or op.start_ns < first_in_window.get(key, w0)
            if backlog:
                stream_free_at[key] = max(stream_free_at.get(key, 0), op.end_ns)
        # Launch latency: the fastest launches are those that found their stream idle; when the
        # GPU never caught up with the host the trace cannot show it, and the default applies.
        lat.sort()
        p5 = lat[len(lat) // 20] if lat else None
        self.launch_latency = latency = p5 if p5 is not None and p5 <= MAX_PLAUSIBLE_LAUNCH_NS \
            else DEFAULT_LAUNCH_LATENCY_NS
        last_end = dict(stream_free_at)
        sim_ops, op_index = self.ops, self.op_index
        for i, op in launched:
            key = (op.device, op.stream)
            op_start, op_end = op.start_ns, op.end_ns
            call_start = nodes[i].obs_start
            pred_end = last_end.get(key)
            if pred_end is None or call_start + latency > pred_end:
                launch_lat, gap = (op_start - call_start if op_start > call_start else 0), 0
            else:
                d = op_start - call_start
                launch_lat = latency if d > latency else (d if d > 0 else 0)
                gap = op_start - pred_end if op_start > pred_end else 0
            j = len(sim_ops)
            op_index[op.id] = j
            node = nodes[i]
            if node.ops:
                node.ops.append(j)
            else:
                node.ops = [j]
            sim_ops.append(_Op(op, key, op_end - op_start, launch_lat, gap))
            last_end[key] = max(pred_end or 0, op_end)

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

    def _host_compute_in(self, a: int, b: int) -> int:
        """Host time in [a, b) spent inside CPU-computing operators (`HOST_COMPUTE_OP_NS`)."""
        spans = self._host_compute_spans
        i = max(0, bisect_left(spans, (a, a)) - 1)
        total = 0
        while i < len(spans) and spans[i][0] < b:
            total += max(0, min(b, spans[i][1]) - max(a, spans[i][0]))
            i += 1
        return total

    @property
    def _host_compute_spans(self) -> list[tuple[int, int]]:
        if self._host_compute_cache is not None:
            return self._host_compute_cache
        from advisor.graph.api_names import is_launch
        from advisor.graph.model import RangeSource

        w0, w1 = self.steps[0].cpu_start_ns, self.steps[-1].cpu_end_ns
        found = []
        for r in self.graph.ranges:
            if r.pid != self.pid or r.source is not RangeSource.OPERATOR or r.start_ns < w0 \
                    or r.start_ns >= w1 or r.duration_ns < HOST_COMPUTE_OP_NS:
                continue
            calls = self.graph.api_calls_in(r.pid, r.tid, r.start_ns, r.end_ns)
            if not any(is_launch(c.name) or "emcpy" in c.name or "emset" in c.name for c in calls):
                found.append((r.start_ns, r.end_ns))
        merged: list[tuple[int, int]] = []
        for a, b in sorted(found):
            if merged and a <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], b))
            else:
                merged.append((a, b))
        self._host_compute_cache = merged
        return merged

    # ----- what-if edits (used by effects) ---------------------------------------------------

    def drop_ops(self, op_ids: Iterable[int], keep_fraction: float = 0.0) -> None:
        """Ops fused away (``keep_fraction`` 0) or made cheaper; a dropped op's launch goes too."""
        c = self._seal()  # written column by column: a fusion can drop most kernels of a step
        op_dur, op_removed, node_ops = c.own("op_dur"), c.own("op_removed"), c.node_ops
        dur, gap = (c.own("dur"), c.own("gap")) if keep_fraction == 0.0 else ([], [])
        index = self.op_index.get
        if keep_fraction != 0.0:  # made cheaper: only the ops' own time changes
            for op_id in op_ids:
                idx = index(op_id)
                if idx is not None:
                    op_dur[idx] = int(op_dur[idx] * keep_fraction)
            return
        launch_node, dispatch, lead_ins = self._launch_nodes(), self.dispatch_ns, self.lead_ins
        for op_id in op_ids:
            idx = index(op_id)
            if idx is None:
                continue
            op_dur[idx] = 0
            op_removed[idx] = True
            k = launch_node[idx]
            # (a node launches one op as a rule: then it is this one, and it is removed)
            if k >= 0 and (len(node_ops[k]) == 1 or all(op_removed[j] for j in node_ops[k])):
                # the launch goes, and with it the framework's dispatch of the op: the host
                # work before the launch, and before the profiler's calls that lead into it
                dur[k] = 0
                g = gap[k]
                lead = lead_ins.get(k) if g < dispatch else None
                gap[k] = g - min(g, dispatch)
                if lead:
                    left = dispatch - g
                    for j in lead:
                        taken = min(gap[j], left)
                        gap[j] -= taken
                        left -= taken
                        if left <= 0:
                            break

    def _launch_nodes(self) -> list[int]:
        """Per op, the node of its launching call (-1: none in the window), read off the trace
        once per template (`drop_ops` asks it of every op it drops)."""
        found = self._derived.get("launch_nodes")
        if found is None:
            ops = self.ops.base if isinstance(self.ops, _Entries) else self.ops
            found = []
            for o in ops:
                call = self.graph.launcher(o.op)
                found.append(self.node_of_call.get(call.id, -1) if call is not None else -1)
            self._derived["launch_nodes"] = found
        return found  # type: ignore[return-value]

    def _measure_dispatch(self) -> int:
        """Host work per launch in this trace: the median host time before a kernel launch
        (framework dispatch and Python per op), read off the replay's own gaps once."""
        from advisor.graph.api_names import is_launch

        nodes = self.nodes.base if isinstance(self.nodes, _Entries) else self.nodes
        # sealed: the gaps are read off the column (a view per node costs three times as much)
        gap_of = self._cols.gap if self._cols is not None else [n.gap for n in nodes]
        lead_ins = self.lead_ins
        gaps = []
        for k, (n, g) in enumerate(zip(nodes, gap_of)):
            if n.call is None or not is_launch(n.call.name):
                continue
            lead = lead_ins.get(k)
            if lead:
                g += sum(gap_of[j] for j in lead)
            if 0 < g < LONG_HOST_WORK_NS:
                gaps.append(g)
        return int(statistics.median(gaps)) if gaps else OP_DISPATCH_NS

    def _profiler_lead_ins(self) -> dict[int, tuple[int, ...]]:
        """Per launch node that the profiler's own calls lead into, those calls' nodes, nearest
        first. nsys names each kernel (``cuKernelGetName``, ``cuKernelGetAttribute``) just
        before the program's launch call, so the host work of the operator's dispatch shows as
        the gap before the profiler's call and the launch follows it at once: read alone, the
        launch's own gap says the operator cost nothing to dispatch (nanoGPT under nsys: a
        median of 0.4 µs, against 33 µs from torch.profiler on the same script), and a kernel
        fused away would keep its dispatch. Traces without such calls (torch.profiler's) have
        none, and their dispatch reads as before."""
        from advisor.engine.profiler_cost import PROFILER_CALLS
        from advisor.graph.api_names import is_launch

        nodes = self.nodes.base if isinstance(self.nodes, _Entries) else self.nodes
        out: dict[int, tuple[int, ...]] = {}
        run: list[int] = []  # the profiler's calls since the last other node, nearest last
        for k, n in enumerate(nodes):
            call = n.call
            if call is not None and call.name in PROFILER_CALLS and not n.ops:
                run.append(k)
                continue
            if run and call is not None and is_launch(call.name):
                out[k] = tuple(reversed(run))
            run = []
        return out

    def set_op_durations(self, durations: dict[int, int]) -> None:
        found = [(idx, ns) for op_id, ns in durations.items()
                 if (idx := self.op_index.get(op_id)) is not None]
        if not found:
            return  # nothing changes (`changed`)
        op_dur = self._seal().own("op_dur")  # written to the column: a view per op costs more
        for idx, ns in found:
            # two fixes of the same kernel (fused attention, FP8) do not compound: the faster
            # one wins
            op_dur[idx] = max(0, min(op_dur[idx], int(ns)))

    def unwait(self, call_ids: Iterable[int]) -> None:
        """The calls no longer block the host (the sync is removed or made asynchronous)."""
        nodes = [i for i in map(self.node_of_call.get, call_ids) if i is not None]
        if not nodes:
            return  # nothing changes (`changed`)
        c = self._seal()  # written column by column: a sync-heavy window has thousands
        wait_op, dur = c.own("wait_op"), c.own("dur")
        for i in nodes:
            wait_op[i] = -1  # None
            if dur[i] > SYNC_RETURN_NS:
                dur[i] = SYNC_RETURN_NS

    def set_call_durations(self, durations: dict[int, int]) -> None:
        for cid, ns in durations.items():
            i = self.node_of_call.get(cid)
            if i is not None:
                n = self.nodes.edit(i)
                n.dur = max(0, int(ns))
                n.wait_op = None

    def scale_host_gaps(self, intervals: Iterable[tuple[int, int]], factor: float) -> None:
        """Host work inside the intervals (between calls) takes ``factor`` of its time.

        A gap is the host work between the chain's frontier and a call; only the part of it that
        lies inside an interval is scaled (a data phase without CUDA calls is one long gap that
        ends at the first call after it).
        """
        import numpy as np  # here, not at the top: most analyses never scale host work

        spans = sorted(intervals)
        if not spans:
            return
        cols = self.columns()
        # The part of [lo, hi) inside the spans is covered(hi) - covered(lo), covered(t) being the
        # spans' summed length before t: one vectorised pass instead of nodes x spans.
        obs = np.asarray(cols.obs_start, dtype=np.int64)
        ovf = np.asarray(cols.overlap_from, dtype=np.int64)
        origin = min(int(obs[0]), spans[0][0])
        lo = np.where(ovf >= 0, obs[np.maximum(ovf, 0)], np.asarray(cols.gap_from, dtype=np.int64))
        cut = _covered(spans, obs - origin, origin) - _covered(spans, lo - origin, origin)
        for i in np.flatnonzero(cut > 0).tolist():
            c = int(cut[i])
            n = self.nodes[i]
            if n.overlap_from is not None:
                self.nodes.edit(i).overlap_offset -= int(c * (1 - factor))
            elif n.gap > 0:
                self.nodes.edit(i).gap = max(0, n.gap - int(c * (1 - factor)))

    def to_side_stream(self, op_ids: Iterable[int], durations: dict[int, int] | None = None) -> None:
        """Ops overlap the step on another stream (a prefetched copy) and stop blocking their
        launching call; their time still bounds the step period from below."""
        for op_id in op_ids:
            idx = self.op_index.get(op_id)
            if idx is None:
                continue
            o = self.ops.edit(idx)
            o.side = True
            if durations and op_id in durations:
                o.dur = int(durations[op_id])
            call = self.graph.launcher(o.op)
            if call is not None and call.id in self.node_of_call:
                n = self.nodes.edit(self.node_of_call[call.id])
                if n.wait_op == idx:
                    n.wait_op = None
                n.dur = min(n.dur, SYNC_RETURN_NS)

    def _input_copies(self) -> list[bool]:
        """Per node: does it launch a host-to-device copy, the batch entering the step? A
        captured step copies its input into static buffers before the replay, so the copy and
        its host work stay. Read off the trace's ops once per template."""
        from advisor.graph.model import GpuOpKind

        found = self._derived.get("input_copies")
        if found is None:
            ops = self.ops.base if isinstance(self.ops, _Entries) else self.ops
            nodes = self.nodes.base if isinstance(self.nodes, _Entries) else self.nodes
            copies = {j for j, o in enumerate(ops)
                      if o.op.kind is GpuOpKind.MEMCPY and o.op.copy_kind == "HtoD"}
            found = [not copies.isdisjoint(n.ops) for n in nodes] if copies else [False] * len(nodes)
            self._derived["input_copies"] = found
        return found  # type: ignore[return-value]

    def _host_compute_cover(self) -> tuple[list[int], list[int], list[int]]:
        """`_host_compute_spans` as (starts, ends, covered time before each span): the host
        compute time in [a, b) is then ``covered(b) - covered(a)``, two bisects a node
        instead of a walk over the spans (`capture_graph` asks it of every node it captures)."""
        found = self._derived.get("host_compute_cover")
        if found is None:
            spans = self._host_compute_spans  # sorted, disjoint (merged)
            before, total = [], 0
            for a, b in spans:
                before.append(total)
                total += b - a
            found = ([a for a, _ in spans], [b for _, b in spans], before)
            self._derived["host_compute_cover"] = found
        return found  # type: ignore[return-value]

    def _host_compute_in_gaps(self) -> list[int]:
        """Per node, the host compute time (`_host_compute_cover`) between the start of the
        host work in its gap (``gap_from``) and its observed start: both are read off the
        trace and no what-if changes them, so this is computed once per template, not once
        per node per capture."""
        found = self._derived.get("host_compute_in_gaps")
        if found is None:
            c = self._seal()
            cover_starts, cover_ends, cover_before = self._host_compute_cover()
            if not cover_starts:
                found = [0] * len(c.obs_start)
            else:  # covered(x): host compute time before x, inlined (two per node)
                found = []
                for t, f in zip(c.obs_start, c.gap_from):
                    if t == f:  # no host work in the gap
                        found.append(0)
                        continue
                    k = bisect_right(cover_starts, t) - 1
                    at_t = 0 if k < 0 else cover_before[k] + min(t, cover_ends[k]) - cover_starts[k]
                    k = bisect_right(cover_starts, f) - 1
                    at_f = 0 if k < 0 else cover_before[k] + min(f, cover_ends[k]) - cover_starts[k]
                    found.append(max(0, at_t - at_f))
            self._derived["host_compute_in_gaps"] = found
        return found  # type: ignore[return-value]

    def _capture_plan(self, intervals: Iterable[tuple[int, int]]) -> list[_CapturePlan]:
        """Which nodes and ops a capture of ``intervals`` takes, per interval (sorted), read off
        the trace once per template and interval set (`capture_graph` is asked the same steps
        with other constants, for its low and high bounds). A capture takes the calls but the
        input copies (`_input_copies`): the few nodes it leaves are found by bisect, and the
        nodes between them are taken as runs."""
        key = ("capture_plan", tuple(sorted(intervals)))
        found = self._derived.get(key)
        if found is not None:
            return found  # type: ignore[return-value]
        c = self._seal()
        starts, node_ops = c.obs_start, c.node_ops
        left, op_starts = self._not_captured(), self._op_starts()
        found = []
        for a, b in key[1]:
            lo, hi = bisect_left(starts, a), bisect_left(starts, b)
            skip = left[bisect_left(left, lo):bisect_left(left, hi)]
            runs: list[range] = []
            first = lo
            for k in skip:
                if k > first:
                    runs.append(range(first, k))
                first = k + 1
            if hi > first:
                runs.append(range(first, hi))
            ops: list[range | list[int]] = [
                range(op_starts[r.start], op_starts[r.stop]) if op_starts is not None
                else [j for i in r for j in node_ops[i]] for r in runs]
            others = [k for k in skip if k > runs[0].start] if runs else []
            found.append(_CapturePlan(runs, ops, others))
        self._derived[key] = found
        return found

    def _not_captured(self) -> list[int]:
        """The nodes no capture takes (step markers, input copies), in order."""
        found = self._derived.get("not_captured")
        if found is None:
            is_call, input_copy = self._seal().is_call, self._input_copies()
            found = self._derived["not_captured"] = [
                i for i, (call, copy_in) in enumerate(zip(is_call, input_copy))
                if not call or copy_in]
        return found  # type: ignore[return-value]

    def _op_starts(self) -> list[int] | None:
        """Per node, how many ops the nodes before it launched (one more entry: all of them),
        when each node's ops are numbered on from there, as `_link_ops` numbers them: then a
        run of nodes launched one range of ops. None otherwise."""
        found = self._derived.get("op_starts", False)
        if found is False:
            found, n = [], 0
            for ops in self._seal().node_ops:
                found.append(n)
                if ops:
                    if ops[0] != n or (len(ops) > 1 and ops != list(range(n, n + len(ops)))):
                        found = None
                        break
                    n += len(ops)
            else:
                found.append(n)
            self._derived["op_starts"] = found
        return found  # type: ignore[return-value]

    def capture_graph(self, intervals: Iterable[tuple[int, int]],
                      launch_ns: int = GRAPH_LAUNCH_NS, node_gap_ns: int = GRAPH_NODE_GAP_NS) -> None:
        """Host intervals (one per step) become one CUDA graph replay each: the host pays one
        graph launch, kernels follow each other at the graph's node gap, host waits inside go.
        Host-to-device copies of the input and CPU computation stay as they were.

        Each interval's nodes (calls but the input copies, `_capture_plan`) are written as
        slices of the columns: every node's new values depend on that node alone, and a
        capture changes most of the window (issue #17: per-node writes were a replay's
        worth of time per capture)."""
        c = self._seal()
        dur, gap, wait_op, graphed, graph_head, overlap_from, overlap_offset = (
            c.own(f) for f in ("dur", "gap", "wait_op", "graphed", "graph_head", "overlap_from",
                               "overlap_offset"))
        op_graphed, op_gap, op_lat = (c.own(f) for f in ("op_graphed", "op_gap", "op_lat"))
        compute_in_gap = self._host_compute_in_gaps()
        for plan in self._capture_plan(intervals):
            if not plan.runs:
                continue
            head = plan.runs[0].start
            graph_head[head] = True
            dur[head] = launch_ns
            for run in plan.runs:
                a, b = run.start, run.stop
                graphed[a:b] = [True] * (b - a)
                wait_op[a:b] = [-1] * (b - a)
                # Kernels of a graph become ready when the graph launch is issued.
                overlap_from[a:b] = [-1] * (b - a)
                if a == head:
                    a += 1  # the rest of the graph's calls:
                dur[a:b] = [0] * (b - a)
                overlap_offset[a:b] = [0] * (b - a)
                # A graph replay removes the framework's per-op dispatch and the Python between
                # ops, not host computation: a long stretch of host work stays whole, and so
                # does the time of CPU operators inside a short one (an ``aten::randn`` on a CPU
                # tensor, a ``.numpy()`` round trip).
                gap[a:b] = [(cg if cg < g else g) if 0 < g < LONG_HOST_WORK_NS else g
                            for g, cg in zip(gap[a:b], compute_in_gap[a:b])]
            for i in plan.others:  # graphed earlier (an overlapping interval, another capture)
                if graphed[i]:
                    overlap_from[i] = -1
            # A launch-bound kernel now follows its predecessor at the graph's node gap; a gap
            # the GPU itself showed (a wait on another stream) stays.
            for ops in plan.ops:
                if isinstance(ops, range):
                    a, b = ops.start, ops.stop
                    op_graphed[a:b] = [True] * (b - a)
                    op_gap[a:b] = [g if g != 0 else node_gap_ns for g in op_gap[a:b]]
                    op_lat[a:b] = [self.launch_latency] * (b - a)
                else:
                    for j in ops:
                        op_graphed[j] = True
                        if op_gap[j] == 0:
                            op_gap[j] = node_gap_ns
                        op_lat[j] = self.launch_latency

    # ----- replay ------------------------------------------------------------------------------

    def _stream_keys(self) -> dict[tuple[int, int], int]:
        keys: dict[tuple[int, int], int] = {}
        for o in self.ops:
            keys.setdefault(o.stream, len(keys))
        for k in self._stream_free_at:
            keys.setdefault(k, len(keys))
        return keys

    def columns(self) -> _Columns:
        """The nodes and ops as flat columns (built afresh while not sealed)."""
        if self._cols is not None:
            return self._cols
        return _Columns.of(self.nodes, self.ops, self._stream_keys())

    def run(self) -> Replay:
        """The steps replayed until they settle: the window is replayed as the loop it is a
        part of, each pass starting from the GPU queues the previous pass left behind, until a
        pass leaves them as it found them or repeats the previous pass's periods
        (`SETTLE_TOL`).

        The first pass starts with the queues empty, not with the work the trace shows queued
        when the window opened: that backlog is the unfixed program's, and a fix that changes
        how far the GPU runs behind the host turns it into a transient (issue #35: with
        unfused-attention's fix the steps ran 5.14 ms for four steps, then 8.3-10.0 ms, and
        the estimate was the median of the transient). From empty queues each pass leaves
        them at least as full as it found them, so the passes climb to the loop's own backlog
        (the host-bound loop's) or, where the GPU is the bottleneck, to periods that repeat
        while the queue grows."""
        c = self.columns()
        seed = _Queues.empty(len(c.stream_keys))
        periods, left = self._pass(c, seed)
        passes, settled = 1, False
        while True:
            tol = SETTLE_TOL * (statistics.fmean(periods) if periods else 0.0)
            if left.same_as(seed, tol):
                settled = True  # the next pass starts as this one did: it would repeat it
                break
            if passes >= MAX_SETTLE_PASSES:
                break
            seed = left
            again, left = self._pass(c, seed)
            passes += 1
            if all(abs(a - b) <= tol for a, b in zip(again, periods)):
                periods, settled = again, True  # the queue grows, the periods repeat
                break
            periods = again
        return Replay(tuple(periods), settled=settled, passes=passes)

    def run_as_recorded(self) -> Replay:
        """One pass from the queues the trace shows when the window opens: the observed
        timeline itself (unmodified, it reproduces the trace), transient and all."""
        return Replay(self.passes(1, as_recorded=True)[0], settled=False, passes=1)

    def passes(self, n: int, as_recorded: bool = False) -> list[tuple[int, ...]]:
        """The periods of ``n`` passes of the window, each from the queues the one before left
        (the first from empty queues, or ``as_recorded`` from the trace's): what `run` settles
        on, laid out for a check that its steps no longer drift."""
        c = self.columns()
        seed = (_Queues.observed(self._stream_free_at, c.stream_keys, c.obs_start[0])
                if as_recorded else _Queues.empty(len(c.stream_keys)))
        out = []
        for _ in range(n):
            periods, seed = self._pass(c, seed)
            out.append(tuple(periods))
        return out

    def _pass(self, c: _Columns, seed: _Queues) -> tuple[list[int], _Queues]:
        """One replay of the window from the GPU queues ``seed``: the steps' periods, and the
        queues it leaves for the next pass (relative to where its host chain ends)."""
        n_nodes, n_steps = len(c.dur), len(self.steps)
        frontier_of, ovf, ovo, gap, dur = c.frontier, c.overlap_from, c.overlap_offset, c.gap, c.dur
        step_start, step_end, head, graphed = c.step, c.step_end, c.graph_head, c.graphed
        node_ops, wait_op, wake = c.node_ops, c.wait_op, c.wake
        o_stream, o_dur, o_lat, o_gap, o_side, o_removed = (c.op_stream, c.op_dur, c.op_lat,
                                                            c.op_gap, c.op_side, c.op_removed)
        start = [0] * n_nodes
        end = [0] * n_nodes
        op_end = [0] * len(o_dur)
        s = c.obs_start[0]
        stream_free: list[int | None] = [None if t is None else s + t for t in seed.free]
        carry = list(seed.carry)
        # max end of any op launched so far (the GPU-side projection), starting with the work
        # launched before the window that the GPU was still running
        latest_end_launched = s + seed.latest if seed.latest is not None else 0
        starts_at = [0] * n_steps
        ends_at = [0] * n_steps
        side_time = [0] * (n_steps + 1)
        current_step = 0
        graph_head_start = None
        # The columns are walked together (zip) rather than indexed one by one: this loop is
        # what every what-if pays, once per node of the window.
        for i, of, oo, fr, g, d, ops, w, mark, hd in zip(range(n_nodes), ovf, ovo, frontier_of,
                                                         gap, dur, node_ops, wait_op, c.marker,
                                                         head):
            if i:
                s = start[of] + oo if of >= 0 else end[fr] + g
            if mark:
                k = step_start[i]
                if k >= 0:
                    starts_at[k] = s if s > latest_end_launched else latest_end_launched
                    current_step = k
                k = step_end[i]
                if k >= 0:
                    ends_at[k] = s if s > latest_end_launched else latest_end_launched
            e = s + d
            if ops:
                if hd:
                    graph_head_start = s
                launch_base = graph_head_start if (graphed[i] and graph_head_start is not None) else s
                for j in ops:
                    st = o_stream[j]
                    free = stream_free[st]
                    if o_side[j] or o_removed[j]:
                        # The op leaves this stream, but a wait before it (a cross-stream event
                        # the gap encodes) still holds back whatever follows it on the stream,
                        # and a host sync that waited for it now waits for the stream up to its
                        # place.
                        carry[st] += o_gap[j]
                        if o_side[j]:
                            side_time[min(current_step, n_steps - 1)] += o_dur[j]
                        place = launch_base + o_lat[j]
                        if free is not None and free + carry[st] > place:
                            place = free + carry[st]
                        op_end[j] = place
                        continue
                    os_ = launch_base + o_lat[j]
                    if free is not None:
                        ready = free + o_gap[j] + carry[st]
                        carry[st] = 0
                        if ready > os_:
                            os_ = ready
                    t = os_ + o_dur[j]
                    op_end[j] = t
                    stream_free[st] = t
                    if t > latest_end_launched:
                        latest_end_launched = t
            elif hd:
                graph_head_start = s
            if w >= 0 and op_end[w] + wake[i] > e:
                e = op_end[w] + wake[i]
            start[i] = s
            end[i] = e
        self.replayed = (start, end, op_end)  # kept for inspection (tests, timelines)
        periods = [max(ends_at[k] - starts_at[k], side_time[k]) for k in range(n_steps)]
        # The loop goes on where the host chain stands at the window's end (its last node, the
        # last step's end marker): the queues relative to that instant seed the next pass.
        restart = start[-1] if n_nodes else 0
        left = _Queues(tuple(None if t is None else t - restart for t in stream_free),
                       tuple(carry), latest_end_launched - restart if n_nodes else None)
        return periods, left


@dataclass(frozen=True, slots=True)
class _Queues:
    """Where the GPU's streams stand when a pass of the replay starts, relative to the host
    chain's start: each stream's end of queued work (None: never used), the cross-stream waits
    a removed op carried over, and the end of all launched work."""

    free: tuple[int | None, ...]
    carry: tuple[int, ...]
    latest: int | None

    @classmethod
    def observed(cls, free_at: dict[tuple[int, int], int], keys: dict[tuple[int, int], int],
                 origin: int) -> _Queues:
        """The queues the trace shows when the window opens (work launched before it)."""
        free: list[int | None] = [None] * len(keys)
        for key, t in free_at.items():
            free[keys[key]] = t - origin
        latest = max(free_at.values(), default=None)
        return cls(tuple(free), (0,) * len(keys), None if latest is None else latest - origin)

    @classmethod
    def empty(cls, n: int) -> _Queues:
        """Nothing queued on any of ``n`` streams."""
        return cls((None,) * n, (0,) * n, None)

    def same_as(self, other: _Queues, tol: float) -> bool:
        """Would a pass from these queues replay as one from ``other``? Work that ends before
        the host starts holds nothing back, so only the queued work ahead of it counts."""
        def ahead(t: int | None) -> int:
            return t if t is not None and t > 0 else 0

        return (abs(ahead(self.latest) - ahead(other.latest)) <= tol
                and all(abs(ahead(a) - ahead(b)) <= tol for a, b in zip(self.free, other.free))
                and all(abs(a - b) <= tol for a, b in zip(self.carry, other.carry)))


def _merged(markers: list[_Node], calls: list[ApiCall]) -> list[_Node]:
    """The host chain in observed start order: a node per call, and the step markers (sorted),
    each placed before the calls that start at its instant or later. The calls are in start
    order already, so the few markers are put in by bisect rather than the window sorted."""
    starts = [a.start_ns for a in calls]
    nodes: list[_Node] = []
    done = 0
    for m in markers:
        k = bisect_left(starts, m.obs_start)
        nodes += [_Node(a.start_ns, a.end_ns, a.end_ns - a.start_ns, a) for a in calls[done:k]]
        nodes.append(m)
        done = k
    nodes += [_Node(a.start_ns, a.end_ns, a.end_ns - a.start_ns, a) for a in calls[done:]]
    return nodes


def _covered(spans: Sequence[tuple[int, int]], t: np.ndarray, origin: int) -> np.ndarray:
    """Per t, the summed length of the spans' parts before t (overlapping spans count twice)."""
    import numpy as np

    a = np.sort(np.asarray([x for x, _ in spans], dtype=np.int64) - origin)
    b = np.sort(np.asarray([y for _, y in spans], dtype=np.int64) - origin)
    pa = np.concatenate(([0], np.cumsum(a)))
    pb = np.concatenate(([0], np.cumsum(b)))
    na = np.searchsorted(a, t, side="right")
    nb = np.searchsorted(b, t, side="right")
    return (na * t - pa[na]) - (nb * t - pb[nb])


@dataclass(frozen=True, slots=True)
class _CapturePlan:
    """One interval of a capture (`Simulation._capture_plan`): the nodes it takes as runs of
    indices, each run's ops (a range when numbered in node order), and the nodes it does not
    take from its first taken one to its end."""

    runs: list[range]
    ops: list[range | list[int]]
    others: list[int]


@dataclass(slots=True)
class _Columns:
    """A simulation's nodes and ops as flat lists: what the replay loop reads.

    Forks share the lists; `own` copies one before its first change in this simulation."""

    stream_keys: dict[tuple[int, int], int]
    obs_start: list[int]
    is_call: list[bool]
    frontier: list[int]  # the node whose end the host chain continues from (-1: none)
    step: list[int]
    step_end: list[int]
    node_ops: list[list[int] | tuple[()]]
    op_stream: list[int]
    dur: list[int]
    gap: list[int]
    gap_from: list[int]
    overlap_from: list[int]
    overlap_offset: list[int]
    wait_op: list[int]
    wake: list[int]
    graphed: list[bool]
    graph_head: list[bool]
    op_dur: list[int]
    op_lat: list[int]
    op_gap: list[int]
    op_side: list[bool]
    op_graphed: list[bool]
    op_removed: list[bool]
    marker: list[bool]  # the node starts or ends a step (never changes)
    owned: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, nodes: Sequence[_Node], ops: Sequence[_Op], keys: dict[tuple[int, int], int]) -> _Columns:
        frontier, f, f_end = [], -1, -(2**62)
        for i, n in enumerate(nodes):  # observed ends never change: the frontier is fixed
            frontier.append(f)
            if n.obs_end >= f_end:
                f, f_end = i, n.obs_end
        return cls(
            keys, [n.obs_start for n in nodes], [n.call is not None for n in nodes], frontier,
            [-1 if n.step is None else n.step for n in nodes],
            [-1 if n.step_end is None else n.step_end for n in nodes],
            [n.ops for n in nodes], [keys[o.stream] for o in ops],
            [n.dur for n in nodes], [n.gap for n in nodes], [n.gap_from for n in nodes],
            [-1 if n.overlap_from is None else n.overlap_from for n in nodes],
            [n.overlap_offset for n in nodes],
            [-1 if n.wait_op is None else n.wait_op for n in nodes],
            [n.wake for n in nodes], [n.graphed for n in nodes], [n.graph_head for n in nodes],
            [o.dur for o in ops], [o.launch_lat for o in ops], [o.stream_gap for o in ops],
            [o.side for o in ops], [o.graphed for o in ops], [o.removed for o in ops],
            [n.step is not None or n.step_end is not None for n in nodes],
        )

    def own(self, name: str) -> list:
        """Column ``name``, this simulation's own copy, to change."""
        col = getattr(self, name)
        if name not in self.owned:
            col = list(col)
            setattr(self, name, col)
            self.owned.add(name)
        return col

    def fork(self) -> _Columns:
        new = copy.copy(self)
        self.owned, new.owned = set(), set()  # shared from now on: both copy before changing
        return new
