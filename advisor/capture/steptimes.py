"""The measured unprofiled step: host-clock step times of the steps outside the recorded window.

`advisor profile` reads the host's monotonic clock once at every step boundary (no CUDA
synchronization, so nothing changes in how the job runs). Over many steps the host cannot run
ahead of the GPU by more than its queue allows, so the mean interval between boundaries is the
job's real step time, and the median is its typical step; no model is involved. The **mean** is
what estimates are relative to when it exists (the steady time over the steady steps: what the
user pays per step): the trace then says where the time goes and the what-if replay how much a
fix saves, as a fraction applied to this measured step. The median is not: between syncs the
host runs ahead, so most host-clock intervals are short (nanoGPT GPT-2: median 39.3 ms, its own
log 46.4 ms per iteration), and a loader that delivers in bursts (three steps of 60 ms, one of
700 ms) has a median step the job never pays (issue 32). The median and the spread are shown as
the typical step and its variation; a mean far above the median is named a bursty distribution,
with its cause where the session timed it (the data wait of the slow steps).

Kept out: steps before the step time settled (warm-up), the recorded window, the step before it
(the profiler starts up there) and the step after it (the GPU drains the profiled backlog, the
profiler's buffers are freed), and far outliers (Tukey's far-out fence, Q3 + 3 IQR: a checkpoint
or an evaluation inside one step), which the whole-run accounting reports instead.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from advisor.engine.measured import MeasuredStep

MIN_MEASURED_STEPS = 3
"""Fewer measured steps than this give no measured step (one or two are noise, not a median)."""

FAR_OUT_IQR = 3.0
"""Tukey's far-out fence: a step above Q3 + 3 IQR is not the steady step's own variation."""

SLOW_STEP_RATIO = 1.5
"""For the cause of burstiness, a step this many times the median is one of the slow ones."""

CAUSE_SHARE = 0.5
"""The slow steps' excess is put down to the data wait when the wait explains this much of it."""

@dataclass(frozen=True)
class StepClock:
    """What the session saw of the run, read back from its state (also the nsys child's status)."""

    times: tuple[tuple[int, int, int], ...]  # (index, start_ns, end_ns), complete steps
    window: tuple[int, int] | None  # first and last recorded step index
    settled_at: int | None  # steps before this one are warm-up
    activity: Mapping[int, Mapping[str, int]] = field(default_factory=dict)
    run_end_ns: int | None = None
    window_reason: str = ""  # why the window opened where it did (`CaptureState.window_reason`)

    @classmethod
    def from_state(cls, state: Any) -> StepClock:
        get = state.get if isinstance(state, Mapping) else lambda k, d=None: getattr(state, k, d)
        times = tuple((int(i), int(b), int(e)) for i, b, e in get("step_times", []) or [])
        first = get("window_first")
        recorded = list(get("recorded", []) or [])
        window = None
        if first is not None:
            window = (int(first), max(recorded) if recorded else int(first))
        settled_at = get("settled_at")
        if settled_at is None and get("window_pinned", False) and first is not None:
            settled_at = int(first)  # pinned --wait: the user said where warm-up ends
        act = {int(k): dict(v) for k, v in (get("activity", {}) or {}).items()}
        return cls(times, window, None if settled_at is None else int(settled_at), act,
                   get("run_end_ns"), str(get("window_reason", "") or ""))

    def steady_candidates(self) -> list[tuple[int, int]]:
        """(index, ns) of steps after warm-up and away from the window."""
        w = self.window
        out = []
        for i, b, e in self.times:
            if self.settled_at is not None and i <= self.settled_at:
                continue  # warm-up, and the step where the profiler was prepared
            if w is not None and w[0] - 1 <= i <= w[1] + 1:
                continue
            out.append((i, e - b))
        return out


def _quantile(sorted_v: Sequence[float], q: float) -> float:
    if len(sorted_v) == 1:
        return float(sorted_v[0])
    return float(statistics.quantiles(sorted_v, n=100, method="inclusive")[int(q * 100) - 1]) \
        if 0 < q < 1 else float(sorted_v[0] if q <= 0 else sorted_v[-1])


def far_out_fence(values: Sequence[float]) -> float:
    v = sorted(values)
    q1, q3 = _quantile(v, 0.25), _quantile(v, 0.75)
    return q3 + FAR_OUT_IQR * (q3 - q1)


def measured_step(clock: StepClock) -> MeasuredStep | None:
    cand = clock.steady_candidates()
    if len(cand) < MIN_MEASURED_STEPS:
        return None
    fence = far_out_fence([ns for _, ns in cand])
    typical = statistics.median(ns for _, ns in cand)
    kept = [(i, ns) for i, ns in cand
            if ns <= fence or _input_burst(ns, clock.activity.get(i, {}), typical)]
    out = tuple(i for i, ns in cand if (i, ns) not in kept)
    vals = sorted(ns for _, ns in kept)
    median = float(statistics.median(vals))
    return MeasuredStep(
        median_ns=median,
        mean_ns=statistics.fmean(vals),
        stdev_ns=statistics.stdev(vals) if len(vals) > 1 else 0.0,
        p10_ns=_quantile(vals, 0.10),
        p90_ns=_quantile(vals, 0.90),
        count=len(vals),
        steps=tuple(i for i, _ in kept),
        outliers=out,
        unexplained_stdev_ns=_unexplained_stdev(kept, clock.activity),
        window=_window_note(clock),
        burst_cause=burst_cause(kept, clock.activity, median),
    )


def _input_burst(ns: float, activity: Mapping[str, int], typical: float) -> bool:
    """A far-out step that waited for its batch for most of its excess: the input pipeline's own
    rhythm (workers that deliver in bursts), which the user pays on every such step, not a
    checkpoint or an evaluation inside one step. Tukey's fence alone took these out: with 4
    workers on the H100, pytorch/examples' ImageNet loop ran about three 57 ms steps and one
    of 400-700 ms, and the mean of the rest (59 ms) described a step the job never paid (its own
    log: 155 ms per iteration over the same steps)."""
    return activity.get("data", 0) >= CAUSE_SHARE * (ns - typical)


STRUCTURE = ("loader_start_calls", "eval", "checkpoint_calls")
"""Timed host activities that make a step the run's own structure rather than its steady loop:
a DataLoader iterator starting (an epoch or an evaluation pass: forks, the new iterator's
pinned buffers, the validation loop itself), an evaluation, a ``torch.save``."""


def structural(activity: Mapping[str, int]) -> bool:
    """Whether the run's own structure explains the step (`STRUCTURE`): the whole-run
    accounting's business (RUN001-RUN003), not the host's noise."""
    return any(activity.get(k, 0) > 0 for k in STRUCTURE)


def _unexplained_stdev(kept: Sequence[tuple[int, float]],
                       activity: Mapping[int, Mapping[str, int]]) -> float:
    """Standard deviation of the steps less their data wait (see `MeasuredStep`), the steps the
    run's structure explains left out: pytorch/examples' ImageNet with 4 non-persistent workers
    (H100, 21-iteration epochs) read as a host too noisy to measure on (stdev 76.7 ms on a mean
    of 217 ms) from its one epoch start outside the window (a 1499 ms step: restart, validation
    and checkpoint), while the other 19 steps spread 18.5 ms around 146 ms (issue 33)."""
    rest = [ns - activity.get(i, {}).get("data", 0) for i, ns in kept
            if not structural(activity.get(i, {}))]
    return statistics.stdev(rest) if len(rest) > 1 else 0.0


def _window_note(clock: StepClock) -> str:
    if clock.window is None:
        return ""
    first, last = clock.window
    why = clock.window_reason or ("after --wait" if clock.settled_at == first else "")
    return f"window: steps {first}-{last}" + (f", opened {why}" if why else "")


def burst_cause(kept: Sequence[tuple[int, float]], activity: Mapping[int, Mapping[str, int]],
                median: float) -> str:
    """What the slow steps did: their data wait against the others', when the session timed
    it. Said only when it explains at least `CAUSE_SHARE` of their excess over the median; the
    trace's own rules say the rest (a step's host work is not timed per step). Steps the run's
    structure explains (`structural`) are not bursts: a loader's restart waits for its fresh
    workers (and an evaluation's batches count as data), which the whole-run accounting names."""
    steady = [(i, ns) for i, ns in kept if not structural(activity.get(i, {}))]
    slow = [(i, ns) for i, ns in steady if ns > SLOW_STEP_RATIO * median]
    if not slow or not activity:
        return ""
    fast = [i for i, ns in steady if ns <= SLOW_STEP_RATIO * median]
    typical = statistics.median([activity.get(i, {}).get("data", 0) for i in fast] or [0])
    excess = sum(ns - median for _, ns in slow)
    waits = [activity.get(i, {}).get("data", 0) for i, _ in slow]
    explained = sum(min(max(0.0, w - typical), ns - median) for w, (_, ns) in zip(waits, slow))
    if excess <= 0 or explained < CAUSE_SHARE * excess:
        return ""
    return (f"data waits: the {len(slow)} slow steps waited {statistics.fmean(waits) / 1e6:.1f} ms "
            f"on average for their batch against {typical / 1e6:.1f} ms on the others "
            f"({explained / excess:.0%} of their excess): the input pipeline delivers in bursts")
