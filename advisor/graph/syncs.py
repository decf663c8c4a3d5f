"""Which host calls waited for the GPU, and for which GPU op.

A call waited when it may block by its semantics (`api_names.may_block`), or is a launch held
by a full launch queue, and an op launched before it finished while the call was still running:
the host was held until that op's end.
This is read off the timestamps, so it finds implicit syncs too (a pageable ``cudaMemcpyAsync``,
a ``cudaFree``), whatever the trace format.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from advisor.graph.api_names import is_launch, may_block

if TYPE_CHECKING:
    from advisor.graph.model import ApiCall, GpuOp, OpGraph

LAUNCH_QUEUE_BLOCK_NS = 50_000
"""A launch that takes longer than this was blocked: when the host runs ~1000 launches ahead
of the GPU, CUDA's launch queue is full and each launch waits for a kernel to finish (normal
launches take 2-10 µs). Such a launch is a wait on the GPU like a sync."""

END_SLACK_NS = 2_000
"""A wait returns a few microseconds after the op it waited for ends (the host polls or is woken):
ops ending up to this long after the call still count as awaited."""


@dataclass(frozen=True, slots=True)
class HostWait:
    call: ApiCall
    op: GpuOp  # the last op the call waited for
    wait_ns: int  # how long the host was held, from the call's start to the op's end


def _ops_by_pid_end(graph: OpGraph) -> dict[int, tuple[list[int], list[GpuOp]]]:
    """Each process's GPU ops sorted by end, kept on the graph (the replay and several rules
    ask `host_waits` of the same graph; sorting every op each time cost more than the waits)."""
    kept = graph.__dict__.get("_ops_by_pid_end")
    # kept with the list it was built from: a graph whose op list is replaced or grows re-sorts
    if kept is None or kept[0] is not graph.gpu_ops or kept[1] != len(graph.gpu_ops):
        kept = (graph.gpu_ops, len(graph.gpu_ops), _sorted_by_end(graph.gpu_ops))
        graph.__dict__["_ops_by_pid_end"] = kept
    return kept[2]


def _sorted_by_end(gpu_ops: Iterable[GpuOp]) -> dict[int, tuple[list[int], list[GpuOp]]]:
    by_pid: dict[int, list[GpuOp]] = defaultdict(list)
    for op in gpu_ops:
        by_pid[op.pid].append(op)
    out = {}
    for pid, ops in by_pid.items():
        ops.sort(key=lambda o: o.end_ns)
        out[pid] = ([o.end_ns for o in ops], ops)
    return out


def host_waits(graph: OpGraph, calls: Iterable[ApiCall] | None = None) -> list[HostWait]:
    """Every call (of ``calls``, default all) that held its thread waiting for the GPU."""
    index = _ops_by_pid_end(graph)
    out: list[HostWait] = []
    for call in graph.api_calls if calls is None else calls:
        if not may_block(call.name) and not (
            (is_launch(call.name) or call.name.startswith("cudaMemsetAsync"))
            and call.duration_ns > LAUNCH_QUEUE_BLOCK_NS
        ):
            continue
        ends, ops = index.get(call.pid, ([], []))
        lo = bisect_left(ends, call.start_ns)
        hi = bisect_right(ends, call.end_ns + END_SLACK_NS)
        for i in range(hi - 1, lo - 1, -1):
            op = ops[i]
            launched_before = (
                op.correlation is not None and op.correlation < call.correlation
            ) or (op.correlation is None and op.start_ns < call.start_ns)
            own_copy = op.correlation == call.correlation  # a sync copy waits on itself too
            if launched_before or own_copy:
                wait = min(op.end_ns, call.end_ns) - call.start_ns
                if wait > 0:
                    out.append(HostWait(call, op, wait))
                break
    return out


def waited_ops(graph: OpGraph, calls: Iterable[ApiCall] | None = None) -> list[tuple[ApiCall, GpuOp]]:
    return [(w.call, w.op) for w in host_waits(graph, calls)]
