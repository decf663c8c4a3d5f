"""The measured unprofiled step: host-clock step times of the steps outside the recorded window.

`advisor profile` reads the host's monotonic clock once at every step boundary (no CUDA
synchronization, so nothing changes in how the job runs). Over many steps the host cannot run
ahead of the GPU by more than its queue allows, so the mean interval between boundaries is the
job's real step time, and the median is its typical step; no model is involved. This is what
estimates are relative to when it exists: the trace then says where the time goes and the
what-if replay how much a fix saves, as a fraction applied to this measured step.

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

MIN_MEASURED_STEPS = 3
"""Fewer measured steps than this give no measured step (one or two are noise, not a median)."""

FAR_OUT_IQR = 3.0
"""Tukey's far-out fence: a step above Q3 + 3 IQR is not the steady step's own variation."""

MODEL_DISAGREEMENT = 0.10
"""When the replay of the trace without the profiler's overhead misses the measured step by more
than this fraction, the report warns: the calibration does not fit this job."""


@dataclass(frozen=True)
class MeasuredStep:
    """Host-clock statistics of the steady steps outside the window (ns)."""

    median_ns: float
    mean_ns: float
    stdev_ns: float
    p10_ns: float
    p90_ns: float
    count: int
    steps: tuple[int, ...] = ()  # the step indices measured
    outliers: tuple[int, ...] = ()  # steady-phase steps left out as far outliers

    def to_dict(self) -> dict[str, Any]:
        ms = lambda ns: round(ns / 1e6, 4)  # noqa: E731
        return {"median_ms": ms(self.median_ns), "mean_ms": ms(self.mean_ns),
                "stdev_ms": ms(self.stdev_ns), "p10_ms": ms(self.p10_ns), "p90_ms": ms(self.p90_ns),
                "count": self.count, "first_step": min(self.steps) if self.steps else None,
                "last_step": max(self.steps) if self.steps else None,
                "outliers": len(self.outliers),
                "source": "host clock at step boundaries outside the recorded window"}


@dataclass(frozen=True)
class StepClock:
    """What the session saw of the run, read back from its state (also the nsys child's status)."""

    times: tuple[tuple[int, int, int], ...]  # (index, start_ns, end_ns), complete steps
    window: tuple[int, int] | None  # first and last recorded step index
    settled_at: int | None  # steps before this one are warm-up
    activity: Mapping[int, Mapping[str, int]] = field(default_factory=dict)
    run_end_ns: int | None = None

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
                   get("run_end_ns"))

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
    kept = [(i, ns) for i, ns in cand if ns <= fence]
    out = tuple(i for i, ns in cand if ns > fence)
    vals = sorted(ns for _, ns in kept)
    return MeasuredStep(
        median_ns=float(statistics.median(vals)),
        mean_ns=statistics.fmean(vals),
        stdev_ns=statistics.stdev(vals) if len(vals) > 1 else 0.0,
        p10_ns=_quantile(vals, 0.10),
        p90_ns=_quantile(vals, 0.90),
        count=len(vals),
        steps=tuple(i for i, _ in kept),
        outliers=out,
    )
