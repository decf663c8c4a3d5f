"""Communication a single rank's trace shows exposed: what it cannot judge alone, said.

The rules about communication (exposed-communication, stragglers, load imbalance) are job rules:
they read every rank's trace, because from one rank's trace a collective's time is its own
transfer plus the wait for the slowest peer, and neither the peers' progress nor the overlap
they could allow is in it. Run on one rank's trace, advisor runs the rank rules only; without
a word, a step that spends a sixth of its time in all-reduces with no compute beside them (a
public DDP trace, hta/df_index_resolver: 60 ms of 346) read as if communication were not
there. This measures that time on the analysed steps and says where it is judged.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

from advisor.graph.collectives import clip, intersection_ns, is_communication, total
from advisor.graph.intervals import merge
from advisor.graph.model import GpuOp, GpuOpKind, OpGraph, Step

EXPOSED_SHARE = 0.02
"""Share of the steps' time from which exposed communication is mentioned: the rules' own
reporting threshold (a 2% gain), the most any fix of it could give being that time."""


def exposed_comm_ns(ops: Sequence[GpuOp], starts: Sequence[int], step: Step) -> tuple[int, int]:
    """(communication kernel time, the part of it no compute kernel overlaps) in one step's
    GPU window, each as merged intervals (concurrent collectives counted once). ``ops``: the
    step's process's GPU ops by start, ``starts`` their starts; the ops that start in the window
    are the step's, as in the job's rank summary (`advisor.engine.rank_summary`)."""
    lo = step.gpu_start_ns if step.gpu_start_ns is not None else step.cpu_start_ns
    hi = step.gpu_end_ns if step.gpu_end_ns is not None else step.cpu_end_ns
    inside = ops[bisect_left(starts, lo):bisect_left(starts, hi)]
    comm = merge(clip(((o.start_ns, o.end_ns) for o in inside if is_communication(o)), lo, hi))
    if not comm:
        return 0, 0
    compute = merge(clip(((o.start_ns, o.end_ns) for o in inside
                          if o.kind is GpuOpKind.KERNEL and not is_communication(o)), lo, hi))
    return total(comm), total(comm) - intersection_ns(comm, compute)


def exposed_comm_note(graph: OpGraph, steps: Sequence[Step]) -> str | None:
    """A warning when the steps spend `EXPOSED_SHARE` or more of their time in communication
    no compute overlaps; None otherwise (no collectives, or overlapped)."""
    if not steps or not any(is_communication(o) for o in graph.gpu_ops):
        return None
    by_pid: dict[int, list[GpuOp]] = {}
    for o in graph.gpu_ops:
        by_pid.setdefault(o.pid, []).append(o)
    starts: dict[int, list[int]] = {}
    for pid, ops in by_pid.items():
        ops.sort(key=lambda o: o.start_ns)
        starts[pid] = [o.start_ns for o in ops]
    comm = exposed = 0
    for s in steps:
        c, e = exposed_comm_ns(by_pid.get(s.pid, []), starts.get(s.pid, []), s)
        comm, exposed = comm + c, exposed + e
    step_ns = sum(s.time_ns for s in steps)
    if not step_ns or exposed < EXPOSED_SHARE * step_ns:
        return None
    n = len(steps)
    return (f"communication kernels take {comm / n / 1e6:.2f} ms a step, {exposed / n / 1e6:.2f} ms "
            f"({exposed / step_ns:.0%} of the step) with no compute beside them. From one rank's "
            f"trace that time holds the wait for the slowest peer as well as the transfer, so no "
            f"rule here judges it: the job rules (exposed communication, stragglers, load "
            f"imbalance) do, from every rank's trace together (`advisor analyze` given them "
            f"all: the files, their folder or a glob)")
