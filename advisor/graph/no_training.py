"""A trace that records operators but no backward pass and no optimizer step: not a training step.

advisor's rules, fixes and estimates are written for a training loop: a value read every step
is a loss or a metric that can be read every N steps, a loader feeds the next batch while the
GPU trains on this one. An inference trace has neither a backward pass nor an optimizer, and
there a value read back is often the result the caller is waiting for (a public video
classifier's pipeline, tracelens timesformer, fetches its logits with ``.to("cpu")``: host-sync
read it as a removable sync). Where the trace records PyTorch's operators, autograd's backward
operators and the optimizer's ranges would be in it had it trained; their absence is evidence,
and the report says what it means for the advice. Without operator ranges (a CUDA-only nsys
export) the trace cannot tell, and nothing is said; nor where the steps replay CUDA graphs (a
graphed training step's backward and optimizer run inside the replay and record no operators:
the fixed steps of the cpu-bound-loss and uncaptured-cuda-graph scenarios).
"""

from __future__ import annotations

from collections.abc import Sequence

from advisor.graph.model import CpuRange, OpGraph, RangeSource, Step
from advisor.graph.op_names import EVALUATE_FUNCTION
from advisor.graph.queries import uses_cuda_graphs
from advisor.graph.steps import phase_of

MIN_OPERATORS = 50
"""Operator ranges a trace must hold for the absence of backward ones to mean something: a
training step of even a small model runs more than this in its backward alone."""



def _trains(r: CpuRange) -> bool:
    """A range only a training step runs: a backward operator (autograd's node, its
    ``evaluate_function`` wrapper, or an operator the profiler linked to a forward one,
    `CpuRange.fwd_thread`) or an optimizer or backward range (`steps.phase_of`)."""
    return (r.fwd_thread > 0 or r.name.startswith(EVALUATE_FUNCTION) or "Backward" in r.name
            or phase_of(r.name) in ("backward", "optimizer"))


def no_training_note(graph: OpGraph, steps: Sequence[Step]) -> str | None:
    """A warning when the trace's operators show no backward pass and no optimizer step and the
    steps have no backward or optimizer phase; None otherwise."""
    if not steps or any("backward" in s.phases or "optimizer" in s.phases for s in steps):
        return None
    if uses_cuda_graphs(graph, steps):  # a graphed backward and optimizer record no operators
        return None
    operators = 0
    for r in graph.ranges:
        if _trains(r):
            return None
        operators += r.source is RangeSource.OPERATOR
    if operators < MIN_OPERATORS:
        return None
    return (f"the trace records {operators} PyTorch operators and no backward pass or optimizer "
            f"step: if these steps are inference (or a window that caught neither), the advice "
            f"is written for a training step: a value read back may be the result the caller "
            f"needs (host-sync's fix reads values every N steps), and the step time is a "
            f"forward's")
