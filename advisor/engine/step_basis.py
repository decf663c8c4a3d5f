"""Which steps a report rests on, how they were found, and whether they can carry an estimate.

A speedup estimate replays the analysed steps and takes their median (the saving, as a ratio),
applied to their mean (the step the job pays, `RuleContext.baseline_step_ns`). Those numbers mean
something only when the steps are iterations of a steady training loop, and the criteria below
follow from what a median of iterations needs, not from any particular trace. `advisor gate`
and the job view apply the same criteria to the same trace (issue 32):

* **Count.** A median of at least `MIN_STEPS_FOR_ESTIMATE` (3) steps is the smallest that one
  disturbed step (a profiler flush, a garbage collection, a late batch) cannot move.
* **Warm-up.** The first iterations of a process do one-time work (autotuning, compilation,
  allocator growth). Either the window shows it was left behind (a leading step at least
  `WARMUP_SLOW_FACTOR` times slower than the rest was excluded, or the trace's own step numbers
  say iterations ran before the capture), or the median must outvote it: one-time work spans
  up to `WARMUP_ITERATIONS` iterations, so `2 * WARMUP_ITERATIONS + 1` steps are needed.
* **Period.** Inferred steps (the launch pattern) must be periods of the loop: every piece runs
  the same host code (`advisor.graph.steps.host_ranges_repeat`). Pieces that run different code
  are parts of one iteration, and the window is shorter than one training step.
* **Spread.** Reported as the coefficient of variation of the analysed steps; inferred steps
  whose durations vary by more than `INFERRED_MAX_CV` are not a steady period and get low
  confidence (a loop's iterations take about the same time; unrelated pieces do not).

When a criterion fails, rules still report what they found, without an estimate, and the gate
refuses a verdict (exit 2) with the same reason.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from advisor.graph.model import OpGraph, Step
from advisor.graph.steps import WARMUP_SLOW_FACTOR

MIN_STEPS_FOR_ESTIMATE = 3
WARMUP_ITERATIONS = 2
MIN_STEPS_WITHOUT_WARMUP = 2 * WARMUP_ITERATIONS + 1
INFERRED_MAX_CV = 0.5
"""Pieces of an inferred period whose durations spread more than half their mean are no steady
period: a training loop's iterations do the same work."""


@dataclass(frozen=True)
class StepBasis:
    method: str  # "step ranges", "--steps pattern", "launch pattern", "none"
    detail: str  # how exactly: which names, which kernel repeats
    pid: int | None
    tid: int | None
    process: str  # the process name the trace records, "" when none
    chosen_by: str  # "--pid" or "most steps" (advisor's choice among processes)
    processes: int  # processes in the trace with GPU work or steps
    first: str  # name of the first analysed step
    last: str
    analysed: int
    confidence: str  # "high", "medium", "low" (of the steps being steady iterations)
    spread_cv: float | None  # coefficient of variation of the analysed step times
    warmup_evidence: str  # why the warm-up is known to be behind, "" when it is not
    withheld: str | None  # why no estimate is given; None: estimates stand

    def describe(self) -> str:
        """One line for a report: which process, which steps and how they were found."""
        if self.method == "none":
            return "no steps found: " + self.detail
        who = f"process {self.pid}" + (f" ({self.process})" if self.process else "")
        if self.tid is not None:
            who += f", thread {self.tid}"
        chosen = "named by --pid" if self.chosen_by == "--pid" else (
            f"the one with the most steps of {self.processes} processes (--pid picks another)"
            if self.processes > 1 else "")
        if chosen:
            who += f", {chosen}"
        if self.first != self.last:
            span = f"{self.first!r} .. {self.last!r}"
        else:
            span = f"{self.first!r}" + (f" x{self.analysed}" if self.analysed > 1 else "")
        return (f"{who}; steps {span} from {self.method} ({self.detail}); "
                f"confidence {self.confidence}")


def _cv(times: Sequence[int]) -> float | None:
    if len(times) < 2:
        return None
    mean = statistics.fmean(times)
    return statistics.pstdev(times) / mean if mean else None


def _warmup_evidence(graph: OpGraph, steps: Sequence[Step]) -> str:
    first = steps[0]
    thread = sorted((s for s in graph.steps if (s.pid, s.tid) == (first.pid, first.tid)),
                    key=lambda s: s.cpu_start_ns)
    before = [s for s in thread if s.cpu_start_ns < first.cpu_start_ns and s.warmup]
    median = statistics.median(s.time_ns for s in steps)
    slow = [s for s in before if s.time_ns >= WARMUP_SLOW_FACTOR * median]
    if slow:
        return (f"{len(slow)} leading step(s) at least {WARMUP_SLOW_FACTOR:g}x slower than the "
                "median were excluded as warm-up")
    method = graph.step_detection.method
    if method != "launch pattern" and thread and thread[0].index >= 1:
        return (f"the trace's step numbers start at {thread[0].index}: iterations ran before "
                "the capture")
    return ""


def assess(graph: OpGraph, steps: Sequence[Step]) -> StepBasis:
    """The basis of a report's numbers: see the module docstring for the criteria."""
    det = graph.step_detection
    pids = {s.pid for s in graph.steps} | {o.pid for o in graph.gpu_ops}
    chosen_by = "--pid" if det.pid is not None else "most steps"
    if not steps:
        if graph.steps:
            detail = (f"{len(graph.steps)} step(s) from {det.method}, none in steady state "
                      "(all warm-up)")
        else:
            detail = ("no range is named like a step and no kernel sequence repeats; name the "
                      "step ranges with --steps REGEX")
        return StepBasis("none" if not graph.steps else det.method, detail, det.pid, None, "",
                         chosen_by, len(pids), "", "", 0, "low", None, "",
                         "no steady-state training steps to measure")
    first = steps[0]
    times = [s.time_ns for s in steps]
    cv = _cv(times)
    warmup = _warmup_evidence(graph, steps)
    reasons: list[str] = []
    n = len(steps)
    if n < MIN_STEPS_FOR_ESTIMATE:
        reasons.append(f"only {n} steady step{'s' if n != 1 else ''} analysed; an estimate needs "
                       f"at least {MIN_STEPS_FOR_ESTIMATE}, so that one disturbed step cannot "
                       "move the median")
    elif not warmup and n < MIN_STEPS_WITHOUT_WARMUP:
        reasons.append(f"no warm-up seen before the {n} analysed steps, which may still include "
                       "one-time work (autotuning, compilation, allocator growth); without a "
                       f"warm-up step an estimate needs at least {MIN_STEPS_WITHOUT_WARMUP} steps")
    if det.method == "launch pattern" and det.periodic is False:
        reasons.append(det.period_note)
    confidence = "high"
    if det.method == "launch pattern":
        confidence = "medium"
        if det.periodic is False or (cv is not None and cv > INFERRED_MAX_CV):
            confidence = "low"
        elif det.periodic and not reasons:
            confidence = "high"
    if reasons and confidence == "high":
        confidence = "medium"
    process = graph.info.processes.get(first.pid, "")
    return StepBasis(det.method, det.detail, first.pid, first.tid, process, chosen_by,
                     len(pids), first.name, steps[-1].name, n, confidence, cv, warmup,
                     "; ".join(reasons) or None)
