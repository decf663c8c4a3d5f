"""Turn the events an ingest module read into a finished `OpGraph`.

Format-independent: ingest modules only translate rows into model objects; steps, phases,
GPU-side times and warm-up are decided here, the same way for every format.
"""

from __future__ import annotations

from advisor.graph.model import ApiCall, CpuRange, GpuOp, OpGraph, Step, SyncWait, TraceInfo
from advisor.graph.steps import (
    attach_gpu_times,
    attach_phases,
    mark_warmup,
    steps_from_launch_pattern,
    steps_from_ranges,
)


def build_graph(
    info: TraceInfo,
    ranges: list[CpuRange],
    api_calls: list[ApiCall],
    gpu_ops: list[GpuOp],
    syncs: list[SyncWait],
    steps: list[Step] | None = None,
) -> OpGraph:
    """Assemble the graph; find steps from ``ranges`` unless the source already did."""
    graph = OpGraph(info, ranges, api_calls, gpu_ops, syncs, [])
    if steps is None:
        steps = steps_from_ranges(graph.ranges)
        if not steps:
            steps = steps_from_launch_pattern(graph)
            if steps:
                info.notes.append("no step ranges in the trace: steps inferred from the "
                                  "repeating kernel launch sequence")
    graph.steps = sorted(steps, key=lambda s: (s.pid, s.tid, s.cpu_start_ns))
    attach_phases(graph, graph.steps)
    attach_gpu_times(graph, graph.steps, graph.projector)
    mark_warmup(graph.steps)
    return graph
