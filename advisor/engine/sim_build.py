"""Building a simulation from the trace: the host chain, the ops it launches, the waits.

The construction half of `advisor.engine.whatif.Simulation` (a base class of it): the steady
steps' calls of one process, with the step markers, become the host chain in observed start
order (`merged`); each node is linked to the frontier of the chain before it (`_link_chain`),
to the GPU ops it launched with their launch latency and stream gap (`_link_ops`), and to the op
a synchronizing call waited for (`_link_waits`). Built once per analysis, over every call and op
of the window; the what-ifs fork it (`advisor.engine.sim_columns`).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from typing import TYPE_CHECKING

from advisor.engine.sim_columns import Node, Op
from advisor.graph.model import ApiCall, GpuOp
from advisor.graph.syncs import host_waits

if TYPE_CHECKING:
    from advisor.graph.model import OpGraph, Step

DEFAULT_LAUNCH_LATENCY_NS = 4_000
"""Fallback host-launch-to-kernel-start latency when the trace has no idle-stream launches to read
it from (H100, CUDA 13: 3-6 µs in our captures, fixtures/scenarios/uncaptured-cuda-graph/bad)."""

MAX_PLAUSIBLE_LAUNCH_NS = 50_000
"""A launch latency read off the trace above this means the GPU was always behind the host."""


HOST_COMPUTE_OP_NS = 50_000
"""A framework operator that runs this long on the host without launching any GPU work is
computing on the CPU (CPU tensors, host-side preprocessing), not dispatching: eager dispatch of
an operator that launches nothing (a view, a reshape, an empty) costs single-digit µs. A CUDA
graph does not replay such an operator's work, so its time stays in a graph-captured step."""


SYNC_RETURN_NS = 1_500
"""A synchronizing call that finds the GPU already done still costs about this much."""


class SimulationBuild:
    """The construction of a simulation (`advisor.engine.whatif.Simulation` is one): what it
    reads off the trace once, before any what-if."""

    graph: OpGraph
    steps: list[Step]
    pid: int
    nodes: list
    ops: list
    node_of_call: dict[int, int]
    op_index: dict[int, int]
    launch_latency: int
    _stream_free_at: dict[tuple[int, int], int]
    _host_compute_cache: list[tuple[int, int]] | None

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
            sim_ops.append(Op(op, key, op_end - op_start, launch_lat, gap))
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


def merged(markers: list[Node], calls: list[ApiCall]) -> list[Node]:
    """The host chain in observed start order: a node per call, and the step markers (sorted),
    each placed before the calls that start at its instant or later. The calls are in start
    order already, so the few markers are put in by bisect rather than the window sorted."""
    starts = [a.start_ns for a in calls]
    nodes: list[Node] = []
    done = 0
    for m in markers:
        k = bisect_left(starts, m.obs_start)
        nodes += [Node(a.start_ns, a.end_ns, a.end_ns - a.start_ns, a) for a in calls[done:k]]
        nodes.append(m)
        done = k
    nodes += [Node(a.start_ns, a.end_ns, a.end_ns - a.start_ns, a) for a in calls[done:]]
    return nodes

