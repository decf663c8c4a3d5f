"""Turn the events an ingest module read into a finished `OpGraph`.

Format-independent: ingest modules only translate rows into model objects; steps, phases,
GPU-side times and warm-up are decided here, the same way for every format.
"""

from __future__ import annotations

from advisor.errors import InputError
from advisor.graph.model import (
    ApiCall,
    CpuRange,
    GpuOp,
    OpGraph,
    Step,
    StepDetection,
    SyncWait,
    TraceInfo,
)
from advisor.graph.step_pattern import compile_step_pattern
from advisor.graph.steps import (
    attach_gpu_times,
    attach_phases,
    find_launch_pattern,
    host_ranges_repeat,
    mark_warmup,
    steps_from_ranges,
)

NAMED_STEPS = "ranges named like a step (ProfilerStep#N, step N, train_step, iteration N)"


def build_graph(
    info: TraceInfo,
    ranges: list[CpuRange],
    api_calls: list[ApiCall],
    gpu_ops: list[GpuOp],
    syncs: list[SyncWait],
    steps: list[Step] | None = None,
    step_pattern: str | None = None,
    pid: int | None = None,
) -> OpGraph:
    """Assemble the graph; find steps from ``ranges`` unless the source already did.

    ``step_pattern`` (``--steps``) names the step ranges instead of the built-in names; ``pid``
    (``--pid``) is the process analysed. Both are the user's explicit choice, so finding
    nothing for them is an error, not a silent fall-back to advisor's own guess.
    """
    graph = OpGraph(info, ranges, api_calls, gpu_ops, syncs, [])
    _note_duplicate_correlations(graph)
    if pid is not None:
        _check_pid(graph, pid)
    pattern = compile_step_pattern(step_pattern)
    if steps is None:
        steps = steps_from_ranges(graph.ranges, pattern, pid)
    steps = [s for s in steps if pid is None or s.pid == pid]
    if pattern is not None:
        if not steps:
            raise InputError(f"--steps {step_pattern!r}: no range in the trace matches it"
                             + (f" in process {pid}" if pid is not None else ""))
        graph.step_detection = StepDetection("--steps pattern",
                                             f"ranges matching --steps {step_pattern!r}")
    elif steps:
        graph.step_detection = StepDetection("step ranges", NAMED_STEPS)
    else:
        steps, detail = find_launch_pattern(graph, pid=pid)
        if steps:
            info.notes.append("no step ranges in the trace: steps inferred from the "
                              "repeating kernel launch sequence")
            periodic, why = host_ranges_repeat(graph, steps)
            graph.step_detection = StepDetection("launch pattern", detail, periodic, why)
    graph.step_detection.pid = pid
    graph.steps = sorted(steps, key=lambda s: (s.pid, s.tid, s.cpu_start_ns))
    attach_phases(graph, graph.steps)
    attach_gpu_times(graph, graph.steps, graph.projector)
    mark_warmup(graph.steps)
    return graph


def _check_pid(graph: OpGraph, pid: int) -> None:
    seen = set(graph.info.processes) | {c.pid for c in graph.api_calls} | {
        o.pid for o in graph.gpu_ops} | {r.pid for r in graph.ranges}
    if pid not in seen:
        known = ", ".join(str(p) for p in sorted(seen)[:20]) or "none"
        raise InputError(f"--pid {pid}: no such process in the trace (processes: {known})")


def _note_duplicate_correlations(graph: OpGraph) -> None:
    """Say so when calls reuse a correlation id of their process: a trace defect (ids are
    unique per process), whose GPU work is linked to the id's first call only (see
    `OpGraph.api_by_correlation`), so the report's launch links are partial."""
    duplicates = graph.duplicate_correlations
    if duplicates:
        graph.info.notes.append(
            f"{duplicates} of {len(graph.api_calls)} CUDA calls reuse the correlation id of an "
            "earlier call of their process (a trace defect): GPU work is linked to the first "
            "call of each id only")
