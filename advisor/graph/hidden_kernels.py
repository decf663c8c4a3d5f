"""GPU time the trace shows only as whole CUDA graph replays: the kernels inside are not in it.

Nsight Systems traces a CUDA graph launch as one row of ``CUPTI_ACTIVITY_KIND_GRAPH_TRACE`` by
default (``--cuda-graph-trace=graph``): the kernels the graph runs, their names and durations,
are not recorded. Every rule that reads kernels (the precision of the GEMMs, the eager chains,
attention, GEMM shapes, FP8 candidates) then sees nothing in that time, and a step replayed as
a graph reports no finding of theirs whether or not it has one. On the uncaptured-cuda-graph
fixed step (fit and check sets) the FP32 GEMMs inside the graph were a finding measured at
1.39x and 1.54x on the H200 that the nsys captures could not raise, where torch.profiler, which
lists a graph's kernels one by one, raised it (docs/validation.md). The analysis cannot recover
what was not recorded; it says so, with the capture option that records it.
"""

from __future__ import annotations

from collections.abc import Sequence

from advisor.graph.model import GpuOpKind, OpGraph, Step
from advisor.graph.queries import steps_ops

HIDDEN_SHARE = 0.05
"""Share of the analysed steps' GPU op time in whole-graph rows from which the analysis warns:
below it the kernel rules see all but a sliver of the step (their own minimum gain is 2% of
the step), above it a finding of theirs could be hidden."""


def hidden_kernel_note(graph: OpGraph, steps: Sequence[Step]) -> str | None:
    """A warning when CUDA graph replays traced as one row hold a material share of the steps'
    GPU time; None otherwise (no such rows: torch.profiler traces, nsys with node tracing)."""
    ops = steps_ops(graph, steps)
    rows = [o for o in ops if o.kind is GpuOpKind.GRAPH]
    if not rows:
        return None
    hidden = sum(o.duration_ns for o in rows)
    every = sum(o.duration_ns for o in ops)
    share = hidden / every if every else 0.0
    if share < HIDDEN_SHARE:
        return None
    return (f"{share:.0%} of the steps' GPU time is CUDA graph replays traced as one row each "
            f"(Nsight Systems' default --cuda-graph-trace=graph), without the kernels inside: the "
            f"rules that read kernels (precision, eager chains, attention, GEMM shapes, FP8) "
            f"cannot see that time. Capture with `nsys profile --cuda-graph-trace=node` or with "
            f"torch.profiler to have them checked")
