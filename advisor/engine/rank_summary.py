"""One rank's trace reduced to what the cross-rank view needs: a few kilobytes per rank.

This runs inside a Dask task next to the trace (`advisor.job.cluster`): the op graph, with its
hundreds of thousands of events, never leaves the worker; only a `RankSummary` does. It keeps, per
steady-state step: the step's GPU window, compute/communication/idle time, every collective
(kind, start, end, how much of it no compute overlapped), the phase times and the kernel time by
kernel, so the job model can align ranks, find who waited for whom, and say what the slowest rank
spent its extra time on. The per-rank rules run here too and travel as plain findings.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from advisor.graph.collectives import (
    REDUCER_RANGES,
    clip,
    host_collective,
    intersection_ns,
    is_communication,
    kernel_collective,
    total,
)
from advisor.graph.intervals import merge
from advisor.graph.kernels import classify
from advisor.graph.model import CpuRange, GpuOp, GpuOpKind, OpGraph, Step
from advisor.graph.rank_workload import RankWorkload, rank_workload

KERNEL_NAME_CHARS = 160  # enough to tell template instances apart, bounded summary size
TOP_KERNELS = 25
"""Kernels kept per step for the straggler comparison (by time): enough to cover the step."""


@dataclass(slots=True)
class Collective:
    kind: str  # "AllReduce", "SendRecv" ...
    start_ns: int
    end_ns: int
    exposed_ns: int  # the part no compute kernel on this GPU overlapped
    waiting_ns: int = 0  # the part spent waiting for ranks that entered later (set by the job model)

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass(slots=True)
class StepSummary:
    index: int
    start_ns: int  # the step's window on the GPU (on the host where it ran no GPU work)
    end_ns: int
    compute_ns: int  # union of non-communication kernels
    comm_ns: int  # union of communication kernels
    exposed_comm_ns: int  # communication with no compute kernel running beside it
    idle_ns: int  # the GPU ran nothing
    host_ns: int  # the step on the host thread
    phase_ns: dict[str, int] = field(default_factory=dict)  # CPU time per phase (data, forward ...)
    phase_count: dict[str, int] = field(default_factory=dict)  # how often each phase ran in the step
    collectives: list[Collective] = field(default_factory=list)
    host_collectives: dict[str, int] = field(default_factory=dict)  # host range time per collective
    host_wait_on_comm_ns: int = 0  # host calls held until a communication kernel ended
    # the step on the host thread minus the time its calls were held by the device
    # (`_held`): the host's own work, the least the step can take on that rank whatever the
    # others do (0 where the rank's steps are another process's windows, or the rank is GPU-bound)
    host_own_ns: int = 0
    # host time of the rank's gradient communication on any of its threads (outermost
    # collective ranges and DDP's reducer work: on autograd's thread during backward): what a
    # fix issuing fewer collectives takes off the host
    host_comm_ns: int = 0
    kernel_ns: dict[str, int] = field(default_factory=dict)  # top compute kernels by time
    category_ns: dict[str, int] = field(default_factory=dict)

    @property
    def time_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass(slots=True)
class RankSummary:
    path: str
    pid: int
    device: int | None
    gpu: str
    metadata_rank: int | None  # what the trace itself says
    world_size: int | None
    order: int  # position of the file in the order given
    steps: list[StepSummary]
    findings: list[dict] = field(default_factory=list)  # per-rank rule findings, plain data
    notes: list[str] = field(default_factory=list)
    ranks_in_file: int = 1
    rank: int = -1  # resolved by `advisor.job.inputs.assign_ranks`
    rank_source: str = ""
    step_source: str = ""
    trace_format: str = ""  # "nsys-sqlite" or "kineto-json": the job gate compares like with like
    workload: RankWorkload = field(default_factory=RankWorkload)  # what the job gate matches
    # Why this rank's steps cannot carry an estimate (`advisor.engine.step_basis`: the same
    # criteria `advisor analyze` applies to the trace alone); None when they can.
    withheld: str | None = None
    # The step `advisor analyze` reports for this trace alone (the analysed steps' mean without
    # the profiler's host overhead), where the per-rank rules ran on it; None elsewhere.
    report_step_ns: float | None = None


def _job_note(note: str) -> bool:
    """A trace note the job view shows for its rank. Not the trace's own multi-process note (the
    job is that), and not how a phase was renamed by its content: the evidence differs between
    the slim reader's events and the whole trace's, while the phase it names is the same."""
    return "distributed job" not in note and not note.startswith("phase '")


_FILE_RANK = re.compile(r"(?:rank|worker|proc|gpu)[-_.]?(\d+)", re.I)


def rank_from_name(path: str | Path) -> int | None:
    """``rank3.json.gz``, ``trace_rank-12.sqlite``, ``worker_0.pt.trace.json``: the number, else None."""
    m = _FILE_RANK.search(Path(path).name)
    return int(m.group(1)) if m else None


def summarize_graph(graph: OpGraph, order: int = 0) -> list[RankSummary]:
    """Every rank (process with GPU work) in one op graph, summarised."""
    pids = sorted({op.pid for op in graph.gpu_ops} or {s.pid for s in graph.steps})
    steps_by_pid: dict[int, list[Step]] = defaultdict(list)
    for s in graph.steady_steps:
        steps_by_pid[s.pid].append(s)
    if steps_by_pid:  # one step thread per process: the busiest, as the single-trace analysis does
        for pid, steps in steps_by_pid.items():
            tids = Counter(s.tid for s in steps)
            tid = tids.most_common(1)[0][0]
            steps_by_pid[pid] = sorted((s for s in steps if s.tid == tid), key=lambda s: s.cpu_start_ns)
    ops_by_pid: dict[int, list[GpuOp]] = defaultdict(list)
    for op in graph.gpu_ops:
        ops_by_pid[op.pid].append(op)
    waits = _comm_waits(graph)
    out = []
    for pid in pids:
        notes: list[str] = []
        own = steps_by_pid.get(pid)
        if not own and steps_by_pid:
            donor = max(steps_by_pid, key=lambda p: len(steps_by_pid[p]))
            own = steps_by_pid[donor]
            notes.append(f"no steps of its own: the step windows of process {donor} in the same "
                         f"trace (one clock) are used")
        ops = ops_by_pid[pid]
        devices = Counter(o.device for o in ops)
        device = devices.most_common(1)[0][0] if devices else None
        gpu = next((g.name for g in graph.info.gpus if g.device == device), "")
        starts = [o.start_ns for o in ops]  # once per rank, not per step (ops are by start)
        summaries = [_step(graph, s, pid, ops, starts, waits.get(pid, [])) for s in own or []]
        rank = graph.info.rank if len(pids) == 1 else None
        out.append(RankSummary(
            path=graph.info.path, pid=pid, device=device, gpu=gpu, metadata_rank=rank,
            world_size=graph.info.world_size, order=order, steps=summaries,
            notes=notes + [n for n in graph.info.notes if _job_note(n)],
            ranks_in_file=len(pids), step_source=graph.step_source.value,
            trace_format=graph.info.format, workload=rank_workload(own or [], ops),
            withheld=_withheld(graph, pid if len(pids) > 1 else None)))
    return out


def _withheld(graph: OpGraph, pid: int | None) -> str | None:
    """Why `advisor analyze` (with ``--pid`` for one process of several) withholds estimates on
    this rank's steps, so a rank's eligibility is the same in the job as alone (issue 32)."""
    from advisor.engine.context import analysed_steps
    from advisor.engine.step_basis import assess

    # a process without steps of its own is summarised on another's step windows (one clock):
    # its eligibility is theirs
    steps = analysed_steps(graph, pid) or analysed_steps(graph)
    return assess(graph, steps).withheld if steps else None


def _comm_waits(graph: OpGraph) -> dict[int, list[tuple[int, int]]]:
    """Per process, (host start, held ns) of every host call that waited on a collective."""
    from advisor.graph.syncs import host_waits

    out: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for w in host_waits(graph):
        if is_communication(w.op):
            out[w.call.pid].append((w.call.start_ns, w.wait_ns))
    return out


GPU_BOUND = 0.9
"""A rank whose compute kernels cover this share of its step is GPU-bound: no host floor."""



def _held(graph: OpGraph, step: Step) -> list[tuple[int, int]]:
    """Host time in the step held by the device, as merged intervals: inside calls that may
    block (syncs, synchronous copies, frees: `api_names.may_block`), whether or not the trace
    links the wait to the GPU op it waited for (many traces do not), and the part of any other
    CUDA call beyond `LONG_CALL_NS` (a GPU-bound rank's launches block once the launch queue is
    full).

    On the step's thread, and, inside its backward phases, on the process's other threads that
    launch kernels there: the step's thread waits in ``loss.backward()`` while autograd's threads
    launch the backward pass, so their held calls hold the step (a pin-memory thread, which
    launches nothing, does not). On the H200 2-GPU validation at batch 32 (docs/multigpu.md) a
    rank waiting for a slow peer had its launches held 48 ms a step on autograd's thread under
    torch.profiler (on the main thread under nsys); counting them as the host's own work put the
    slow rank's fix at 1.11x where 2.49x was measured. Without backward phase marks only the
    step's thread is read."""
    from advisor.graph.api_names import LONG_CALL_NS, is_launch, may_block

    calls = graph.api_calls
    starts = graph.api_call_starts
    backward = merge(step.phases.get("backward", ()))
    inside = [c for c in calls[bisect_left(starts, step.cpu_start_ns):bisect_left(starts, step.cpu_end_ns)]
              if c.pid == step.pid]
    launching = {c.tid for c in inside if c.tid != step.tid and is_launch(c.name)
                 and any(lo <= c.start_ns < hi for lo, hi in backward)}
    held: list[tuple[int, int]] = []
    for c in inside:
        end = min(c.end_ns, step.cpu_end_ns)
        start = c.start_ns if may_block(c.name) else c.start_ns + LONG_CALL_NS
        if start >= end:
            continue
        if c.tid == step.tid:
            held.append((start, end))
        elif c.tid in launching:
            held.extend(i for lo, hi in backward for i in clip(((start, end),), lo, hi))
    return merge(held)


def _outermost(graph: OpGraph, step: Step, wanted: Callable[[str], object]) -> list[CpuRange]:
    """The step's outermost ranges that ``wanted`` accepts, on every thread of its process: DDP
    issues its gradient all-reduces, and runs its reducer, on autograd's thread, not the step's
    (``c10d::allreduce_`` holds ``nccl:all_reduce``: the outer one only)."""
    out = []
    for pid, tid in graph.range_threads:
        if pid != step.pid:
            continue
        covered = 0
        for r in graph.ranges_in(pid, tid, step.cpu_start_ns, step.cpu_end_ns):
            if r.start_ns >= covered and wanted(r.name):
                out.append(r)
                covered = r.end_ns
    return out


def _host_collectives(graph: OpGraph, step: Step) -> dict[str, int]:
    """Host time per collective kind in the step, on every thread of its process."""
    out: Counter[str] = Counter()
    for r in _outermost(graph, step, host_collective):
        out[host_collective(r.name)] += r.duration_ns
    return dict(out)


def _host_comm_ns(graph: OpGraph, step: Step, held: list[tuple[int, int]]) -> int:
    """The host's own time per step in gradient communication: outermost collective ranges and
    DDP's per-bucket reducer ranges on every thread of the step's process, less the ``held``
    time inside them (the floor leaves that out already; a fix that removes these ranges must
    not take it off twice)."""
    ranges = merge((r.start_ns, r.end_ns) for r in _outermost(
        graph, step, lambda n: bool(host_collective(n)) or n.startswith(REDUCER_RANGES)))
    return total(ranges) - intersection_ns(ranges, held)


def _overlap_with(merged: list[tuple[int, int]]) -> Callable[[int, int], int]:
    """``overlap(s, e)``: the length of [s, e) inside ``merged`` (sorted, disjoint), by two
    bisects on the covered time before each point. Equal to ``intersection_ns([(s, e)],
    merged)``, which walks ``merged`` from its start for every collective of the step (issue
    #39: a step of many collectives over many compute kernels was quadratic)."""
    starts = [a for a, _ in merged]
    before = [0]
    for a, b in merged:
        before.append(before[-1] + b - a)

    def upto(t: int) -> int:
        k = bisect_right(starts, t) - 1
        return 0 if k < 0 else before[k] + min(t, merged[k][1]) - starts[k]

    return lambda s, e: upto(e) - upto(s) if e > s else 0


def _step(graph: OpGraph, step: Step, pid: int, ops: list[GpuOp], starts: list[int],
          waits: list[tuple[int, int]]) -> StepSummary:
    lo = step.gpu_start_ns if step.gpu_start_ns is not None else step.cpu_start_ns
    hi = step.gpu_end_ns if step.gpu_end_ns is not None else step.cpu_end_ns
    inside = ops[bisect_left(starts, lo):bisect_left(starts, hi)]
    is_comm = [is_communication(o) for o in inside]  # asked once an op (three uses below)
    comm = [o for o, c in zip(inside, is_comm) if c]
    compute = [o for o, c in zip(inside, is_comm) if not c and o.kind is GpuOpKind.KERNEL]
    comm_u = merge(clip(((o.start_ns, o.end_ns) for o in comm), lo, hi))
    comp_u = merge(clip(((o.start_ns, o.end_ns) for o in compute), lo, hi))
    busy = merge(clip(((o.start_ns, o.end_ns) for o in inside), lo, hi))
    overlap = _overlap_with(comp_u)
    collectives = [
        Collective(kernel_collective(o.name), o.start_ns, o.end_ns,
                   o.duration_ns - overlap(o.start_ns, o.end_ns))
        for o in comm
    ]
    kernel_ns: Counter[str] = Counter()
    category_ns: Counter[str] = Counter()
    for o in compute:
        kernel_ns[o.name[:KERNEL_NAME_CHARS]] += o.duration_ns
    for o in inside:
        category_ns[classify(o).value] += o.duration_ns
    own = step.pid == pid
    host_coll = _host_collectives(graph, step) if own else {}
    waited = sum(ns for t, ns in waits if step.cpu_start_ns <= t < step.cpu_end_ns)
    held_at = _held(graph, step) if own else []
    held = total(held_at)
    compute_ns = total(comp_u)
    comm_ns = total(comm_u)
    return StepSummary(
        index=step.index, start_ns=lo, end_ns=hi,
        compute_ns=compute_ns, comm_ns=comm_ns,
        exposed_comm_ns=comm_ns - intersection_ns(comm_u, comp_u),
        idle_ns=(hi - lo) - total(busy), host_ns=step.cpu_ns,
        phase_ns={k: sum(e - s for s, e in v) for k, v in step.phases.items()} if step.pid == pid else {},
        phase_count={k: len(v) for k, v in step.phases.items()} if step.pid == pid else {},
        collectives=collectives, host_collectives=host_coll, host_wait_on_comm_ns=waited,
        # no floor where the GPU computes most of the step: the GPU is that rank's limit
        host_own_ns=(step.cpu_ns - held if own and compute_ns < GPU_BOUND * (hi - lo) else 0),
        host_comm_ns=_host_comm_ns(graph, step, held_at) if own else 0,
        kernel_ns=dict(kernel_ns.most_common(TOP_KERNELS)), category_ns=dict(category_ns))


def finding_record(f) -> dict:
    """A per-rank `Finding` as plain data (it crosses process boundaries)."""
    return {
        "rule": f.rule, "code": f.code, "message": f.message, "fix": f.fix.title,
        "fix_snippet": f.fix.snippet, "fix_kind": f.fix.kind,
        "speedup": f.estimate.speedup, "low": f.estimate.low, "high": f.estimate.high,
        "confidence": f.confidence.value,
    }
