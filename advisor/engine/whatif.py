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
window holds 10^5 nodes (networkx does the cross-rank critical path, `advisor.engine.job_model`).

Model constants are measured; each cites where.
"""

from __future__ import annotations

import copy
import statistics
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from advisor.engine.sim_build import (  # noqa: F401 - the model's constants, read here by rules and tests
    DEFAULT_LAUNCH_LATENCY_NS,
    HOST_COMPUTE_OP_NS,
    MAX_PLAUSIBLE_LAUNCH_NS,
    SYNC_RETURN_NS,
    SimulationBuild,
    merged,
)
from advisor.engine.sim_columns import Built, Columns, Entries, Node, NodeView, Op, OpView
from advisor.engine.sim_replay import (  # noqa: F401 - the model's constants, read here by tests
    MAX_SETTLE_PASSES,
    SETTLE_TOL,
    Queues,
    Replay,
    replay_pass,
    settle,
)
from advisor.graph.model import OpGraph, Step

if TYPE_CHECKING:
    import numpy as np

GRAPH_LAUNCH_NS = 10_000
"""Host cost of one replay of a captured training step (`CUDAGraph.replay()` from Python).
Measured without a profiler by `benchmarks/graph_launch_cost.py` on the H200 (torch 2.11,
CUDA 13.0): for graphs of 100 to 4,000 kernels, 4.5-7.1 µs while earlier work still runs and
up to 21-22 µs from an idle GPU; the profiled captures' 112-370 µs per launch are the
profilers' callbacks. The rule's range charges half and twice this (both inside the measured
range; tests/engine/test_graph_launch_constant.py)."""

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


class Simulation(SimulationBuild):
    """The steady steps of one process as a replayable dependency graph: built from the trace
    (`SimulationBuild`), sealed into columns (`advisor.engine.sim_columns`), forked and edited
    per what-if (the edit methods below), replayed (`advisor.engine.sim_replay`)."""

    def __init__(self, graph: OpGraph, steps: Sequence[Step]) -> None:
        if not steps:
            raise ValueError("no steps to simulate")
        self.graph = graph
        self.steps = list(steps)
        self._cols: Columns | None = None  # set once sealed (`_seal`)
        pid = self.steps[0].pid
        self.pid = pid
        w0, w1 = self.steps[0].cpu_start_ns, self.steps[-1].cpu_end_ns
        starts = graph._call_starts[0]  # calls are sorted by start: bisect to the window
        calls = [a for a in graph.api_calls[bisect_left(starts, w0):bisect_left(starts, w1)]
                 if a.pid == pid]
        markers = [Node(s.cpu_start_ns, s.cpu_start_ns, 0, step=i) for i, s in enumerate(self.steps)]
        markers += [Node(s.cpu_end_ns, s.cpu_end_ns, 0, step_end=i) for i, s in enumerate(self.steps)]
        markers.sort(key=lambda n: (n.obs_start, n.step is not None))  # an end before a start
        self.nodes = Built(merged(markers, calls))
        nodes = self.nodes
        self.node_of_call = {n.call.id: i for i, n in enumerate(nodes) if n.call is not None}
        self.ops: list[Op] = Built()
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

    def _seal(self) -> Columns:
        """From here on the changeable fields live in flat columns (what `run` reads) and the
        nodes and ops are views of them; until then they are plain objects (cheap to build)."""
        if self._cols is None:
            self._cols = Columns.of(self.nodes, self.ops, self._stream_keys())
            self.nodes = Entries(self.nodes, self._cols, NodeView)  # type: ignore[assignment]
            self.ops = Entries(self.ops, self._cols, OpView)  # type: ignore[assignment]
        return self._cols

    def seal(self) -> Columns:
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
        new.nodes = Entries(self.nodes.base, cols, NodeView)
        new.ops = Entries(self.ops.base, cols, OpView)
        return new

    def changed(self) -> bool:
        """Has this what-if changed anything since it was forked (or built)? Every edit goes
        through a column it then owns (`Columns.own`)."""
        return self._cols is None or bool(self._cols.owned)


    def remove_profiler_overhead(self, calibration=None) -> None:
        """Take the tracing profiler's own host cost out of the timeline (the calibration
        detected from the trace unless one is given: `advisor.engine.profiler_cost`); the host
        work per launch is measured again after it."""
        from advisor.engine import profiler_cost

        self.calibration = calibration or profiler_cost.detect(self.graph)
        profiler_cost.remove(self, self.calibration)
        self.dispatch_ns = self._measure_dispatch()


    # ----- what-if edits (used by effects) ---------------------------------------------------

    def drop_ops(self, op_ids: Iterable[int], keep_fraction: float = 0.0,
                 keep_launches: bool = False) -> None:
        """Ops fused away (``keep_fraction`` 0) or made cheaper; a dropped op's launch goes too,
        unless ``keep_launches`` (its GPU time goes, the host work to launch it stays)."""
        c = self._seal()  # written column by column: a fusion can drop most kernels of a step
        op_dur, op_removed, node_ops = c.own("op_dur"), c.own("op_removed"), c.node_ops
        cheaper = keep_fraction != 0.0 or keep_launches
        dur, gap = ([], []) if cheaper else (c.own("dur"), c.own("gap"))
        index = self.op_index.get
        if cheaper:  # made cheaper (or free): only the ops' own time changes
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
            ops = self.ops.base if isinstance(self.ops, Entries) else self.ops
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

        nodes = self.nodes.base if isinstance(self.nodes, Entries) else self.nodes
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

        nodes = self.nodes.base if isinstance(self.nodes, Entries) else self.nodes
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

    def extend_ops(self, extra: dict[int, int]) -> None:
        """Ops take ``extra[op]`` ns longer (`ExtendOps`)."""
        found = [(idx, ns) for op_id, ns in extra.items()
                 if (idx := self.op_index.get(op_id)) is not None]
        if not found:
            return
        op_dur = self._seal().own("op_dur")
        for idx, ns in found:
            op_dur[idx] = op_dur[idx] + max(0, int(ns))

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

    def add_dispatches(self, call_ids: Iterable[int], per_call: float) -> None:
        """Host work of ``per_call`` more eager operators before each call (a launch): per
        operator the trace's median dispatch (`dispatch_ns`) and the median time of these
        launch calls (a call's own time can hold a wait: a full launch queue, lazy loading)."""
        found = [i for i in (self.node_of_call.get(c) for c in call_ids) if i is not None]
        if not found:
            return
        launch = statistics.median(self.nodes[i].dur for i in found)
        extra = int(per_call * (self.dispatch_ns + launch))
        for i in found:
            n = self.nodes.edit(i)
            n.gap = n.gap + extra

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
        cut = covered(spans, obs - origin, origin) - covered(spans, lo - origin, origin)
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
            ops = self.ops.base if isinstance(self.ops, Entries) else self.ops
            nodes = self.nodes.base if isinstance(self.nodes, Entries) else self.nodes
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

    def _capture_plan(self, intervals: Iterable[tuple[int, int]]) -> list[CapturePlan]:
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
            found.append(CapturePlan(runs, ops, others))
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

    def columns(self) -> Columns:
        """The nodes and ops as flat columns (built afresh while not sealed)."""
        if self._cols is not None:
            return self._cols
        return Columns.of(self.nodes, self.ops, self._stream_keys())

    def run(self) -> Replay:
        """The steps replayed until they settle (`advisor.engine.sim_replay.settle`)."""
        return settle(self.columns(), len(self.steps), self._pass)

    def run_as_recorded(self) -> Replay:
        """One pass from the queues the trace shows when the window opens: the observed
        timeline itself (unmodified, it reproduces the trace), transient and all."""
        return Replay(self.passes(1, as_recorded=True)[0], settled=False, passes=1)

    def passes(self, n: int, as_recorded: bool = False) -> list[tuple[int, ...]]:
        """The periods of ``n`` passes of the window, each from the queues the one before left
        (the first from empty queues, or ``as_recorded`` from the trace's): what `run` settles
        on, laid out for a check that its steps no longer drift."""
        c = self.columns()
        seed = (Queues.observed(self._stream_free_at, c.stream_keys, c.obs_start[0])
                if as_recorded else Queues.empty(len(c.stream_keys)))
        out = []
        for _ in range(n):
            periods, seed = self._pass(c, seed)
            out.append(tuple(periods))
        return out

    def _pass(self, c: Columns, seed: Queues) -> tuple[list[int], Queues]:
        """One pass (`advisor.engine.sim_replay.replay_pass`); its timeline is kept as
        ``replayed`` for inspection (tests, timelines)."""
        periods, left, self.replayed = replay_pass(c, len(self.steps), seed)
        return periods, left


def covered(spans: Sequence[tuple[int, int]], t: np.ndarray, origin: int) -> np.ndarray:
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
class CapturePlan:
    """One interval of a capture (`Simulation._capture_plan`): the nodes it takes as runs of
    indices, each run's ops (a range when numbered in node order), and the nodes it does not
    take from its first taken one to its end."""

    runs: list[range]
    ops: list[range | list[int]]
    others: list[int]

