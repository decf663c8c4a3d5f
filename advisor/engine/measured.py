"""The measured baseline: what `advisor profile` timed outside its window, as an analysis input.

The trace says where a profiled step's time goes; the session's host clock says how long the
unprofiled steps really took (`MeasuredStep`) and where the whole run's time went
(`RunAccount`). Both are measured before the rules run (`advisor.capture.baseline` builds them
from the session's step clock) and travel in `advisor.analysis.AnalysisInput` as a
`MeasuredBaseline`; `on_measured` then puts the rules' estimates on the measured step: each
step-relative estimate keeps the replay's relative saving (its speedup) and is re-expressed
against the measured mean step, so ``step_ms`` and ``predicted_step_ms`` describe the job as it
runs. The types live here, below the analysis, because the analysis and the report hold them;
the clock they are measured from is the capture's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from advisor.engine.rule import Estimate, Finding
from advisor.engine.runner import RuleResults

MODEL_DISAGREEMENT = 0.10
"""When the replay of the trace without the profiler's overhead misses the measured step by more
than this fraction, the report warns: the calibration does not fit this job."""

BURSTY_RATIO = 1.2
"""A mean step this many times its median is a bursty distribution: a few long steps carry a
real share of the run (a loader whose workers catch up every few steps), so the typical step
and the step the user pays differ, and the report says so."""

RUN_CATEGORIES = {"loader-restarts": "input", "blocking-checkpoints": "host",
                  "frequent-evaluation": "host"}
"""The report categories of the whole-run findings (they are not rule plugins: they need the
run's clock, which no trace holds)."""


@dataclass(frozen=True)
class MeasuredStep:
    """Host-clock statistics of the steady steps outside the window (ns); how they are picked:
    `advisor.capture.steptimes`."""

    median_ns: float
    mean_ns: float
    stdev_ns: float
    p10_ns: float
    p90_ns: float
    count: int
    steps: tuple[int, ...] = ()  # the step indices measured
    outliers: tuple[int, ...] = ()  # steady-phase steps left out as far outliers
    window: str = ""  # when the recorded window opened and why (`advisor.capture.settle`)
    burst_cause: str = ""  # what the slow steps of a bursty distribution did, when timed
    noisy: str | None = None  # why this host is too noisy to build estimates on (baseline.py)
    # The spread of the steps less their timed data wait: the variation the job's own input
    # pipeline does not explain (equal to ``stdev_ns`` when no DataLoader was timed). Steps the
    # run's own structure explains (a DataLoader starting, an evaluation, a checkpoint) are
    # not in it: the whole-run accounting reports them (`advisor.capture.steptimes`).
    unexplained_stdev_ns: float = 0.0

    @property
    def baseline_ns(self) -> float:
        """The step the user pays: the mean of the steady steps (`advisor.capture.steptimes`)."""
        return self.mean_ns

    @property
    def bursty(self) -> bool:
        return self.median_ns > 0 and self.mean_ns > BURSTY_RATIO * self.median_ns

    def to_dict(self) -> dict[str, Any]:
        ms = lambda ns: round(ns / 1e6, 4)  # noqa: E731
        return {"baseline_ms": ms(self.baseline_ns), "basis": "mean",
                "median_ms": ms(self.median_ns), "mean_ms": ms(self.mean_ns),
                "stdev_ms": ms(self.stdev_ns), "p10_ms": ms(self.p10_ns), "p90_ms": ms(self.p90_ns),
                "count": self.count, "first_step": min(self.steps) if self.steps else None,
                "last_step": max(self.steps) if self.steps else None,
                "outliers": len(self.outliers),
                "bursty": self.bursty,
                "mean_over_median": (round(self.mean_ns / self.median_ns, 3)
                                     if self.median_ns else None),
                "burst_cause": self.burst_cause or None,
                "window": self.window or None,
                "noisy_host": self.noisy,
                "source": "host clock at step boundaries outside the recorded window"}

    def describe(self) -> list[str]:
        """The lines every view prints under the step time: typical step, spread, burstiness,
        when the window opened."""
        ms = lambda ns: f"{ns / 1e6:.3f} ms"  # noqa: E731
        out = [f"typical step (median) {ms(self.median_ns)}, p10-p90 {ms(self.p10_ns)}-"
               f"{ms(self.p90_ns)}, stdev {ms(self.stdev_ns)} over {self.count} unprofiled steps"]
        if self.bursty:
            out.append(f"bursty: the mean step is {self.mean_ns / self.median_ns:.2f}x the "
                       "median (a few long steps carry a real share of the run)"
                       + (f"; {self.burst_cause}" if self.burst_cause else ""))
        if self.window:
            out.append(self.window)
        return out


@dataclass(frozen=True)
class SlowStep:
    index: int
    time_ns: int
    excess_ns: int
    causes: dict[str, int]  # cause -> ns of the excess it explains ("other" for the rest)


@dataclass(frozen=True)
class RunTotal:
    """Every fix over the whole run, the two kinds kept apart (issue #34): step fixes save their
    share of the steady steps' time (the settled step's estimate), run fixes the time outside
    steady steps they remove (worker restarts, checkpoints, evaluation). They act on disjoint
    time, so their savings add."""

    run_ns: int
    step_fixes_saved_ns: float
    run_fixes_saved_ns: float

    @property
    def after_ns(self) -> float:
        return max(1.0, self.run_ns - self.step_fixes_saved_ns - self.run_fixes_saved_ns)

    @property
    def speedup(self) -> float:
        return self.run_ns / self.after_ns

    def to_dict(self) -> dict[str, float]:
        return {"run_ms": round(self.run_ns / 1e6, 3), "after_ms": round(self.after_ns / 1e6, 3),
                "step_fixes_saved_ms": round(self.step_fixes_saved_ns / 1e6, 3),
                "run_fixes_saved_ms": round(self.run_fixes_saved_ns / 1e6, 3),
                "speedup": round(self.speedup, 4)}


@dataclass(frozen=True)
class RunAccount:
    """The run's wall time split into its parts (`advisor.capture.accounting.account`)."""

    run_ns: int
    steps: int
    steady_step_ns: float
    parts_ns: dict[str, int]  # startup, warmup, profiled, steady, slow_steps, between_steps, end
    causes_ns: dict[str, int]  # what the host did in the time outside steady steps
    slow_steps: list[SlowStep] = field(default_factory=list)
    loader_restarts: int = 0
    loader_restart_ns: int = 0  # loader starts after the first, with their first batch's wait
    checkpoints: int = 0
    total: RunTotal | None = None  # every fix over the whole run (`run_total`), once estimated

    @property
    def outside_steady_ns(self) -> int:
        p = self.parts_ns
        return p["slow_steps"] + p["between_steps"]

    def to_dict(self) -> dict[str, Any]:
        ms = lambda ns: round(ns / 1e6, 3)  # noqa: E731
        return {
            "run_ms": ms(self.run_ns),
            "steps": self.steps,
            "steady_step_ms": ms(self.steady_step_ns),
            "parts_ms": {k: ms(v) for k, v in self.parts_ns.items()},
            "outside_steady_ms": ms(self.outside_steady_ns),
            "outside_steady_causes_ms": {k: ms(v) for k, v in self.causes_ns.items()},
            "slow_steps": [{"step": s.index, "time_ms": ms(s.time_ns), "excess_ms": ms(s.excess_ns),
                            "causes_ms": {k: ms(v) for k, v in s.causes.items()}}
                           for s in self.slow_steps[:50]],
            "loader_restarts": self.loader_restarts,
            "loader_restart_ms": ms(self.loader_restart_ns),
            "checkpoints": self.checkpoints,
            "fixes_together": self.total.to_dict() if self.total is not None else None,
        }


def run_total(acc: RunAccount | None, combined: Estimate | None,
              findings: Iterable[Finding]) -> RunTotal | None:
    """The whole run with every fix: the step fixes together (``combined``, on the settled
    step) applied to the steady steps' time, and the run-relative findings' savings."""
    if acc is None or acc.run_ns <= 0:
        return None
    steady = acc.parts_ns.get("steady", 0)
    step_saved = 0.0
    if combined is not None and not combined.withheld and combined.step_ns > 0:
        step_saved = steady * max(0.0, 1 - combined.predicted_step_ns / combined.step_ns)
    run_saved = sum(f.estimate.saved_ns_per_step * acc.steps for f in findings
                    if f.estimate.relative_to == "run")
    return RunTotal(acc.run_ns, step_saved, run_saved)


@dataclass(frozen=True)
class MeasuredBaseline:
    """The step and the run `advisor profile` measured outside its window, fixed before the
    rules run (an `AnalysisInput` without one has the replayed baseline)."""

    step: MeasuredStep | None  # None: too few steady steps outside the window to measure
    run: RunAccount | None  # None: the run's end (or any step) was not seen
    run_findings: tuple[Finding, ...] = ()  # findings about time outside steady steps
    # The calibration was fitted to ``step`` (or a fit was tried and refused): its warning has
    # said how the replay and the measured step compare, so `on_measured` does not say it again.
    fit_tried: bool = False

    @property
    def usable(self) -> bool:
        """Whether estimates are built on the measured step (one was measured, on a quiet host)."""
        return self.step is not None and self.step.noisy is None


def disagreement(replayed: float, measured: float, off: float, trace_format: str) -> str:
    """The warning when the replay without the profiler's overhead and the measured steps
    disagree. Under nsys the steps outside the window are not unprofiled: nsys intercepts the
    traced APIs for the whole run (the capture range only limits what it records), which on
    the H100 slowed nanoGPT's launch-bound steps outside the window by 15% (docs/validation.md)."""
    head = (f"the trace replayed without the profiler's overhead gives {replayed / 1e6:.2f} ms "
            f"per step, but the steps outside the window measured {measured / 1e6:.2f} ms "
            f"({off:+.0%})")
    if trace_format == "nsys-sqlite" and off < 0:
        return (head + ": they ran under nsys, which intercepts CUDA calls for the whole run, "
                "not only in its window; the default torch.profiler window measures unprofiled "
                "steps; estimates are relative to the measured step")
    return (head + ": the profiler-overhead model does not fit this job; estimates are relative "
            "to the measured step")


def _rebase(e: Estimate, step: float) -> Estimate:
    """One baseline per report: every step-relative estimate is the replay's speedup applied to
    the measured mean step (as `RuleContext.estimate` does with the replayed one)."""
    if e.relative_to != "step" or e.step_ns <= 0:
        return e
    return e.on_step(step)


def _rebased(f: Finding, step: float) -> Finding:
    alone = _rebase(f.alone, step) if f.alone is not None else None
    return replace(f, estimate=_rebase(f.estimate, step), alone=alone)


def on_measured(results: RuleResults, measured: MeasuredBaseline, trace_format: str,
                ) -> tuple[RuleResults, RunAccount | None, tuple[str, ...]]:
    """The rules' results on the measured baseline: new results (``results`` is left as it
    was), the run's account with every fix's total, and the warning a disagreement between
    the replay and the measured step earns."""
    r, warnings = results, ()
    step = measured.step
    if measured.usable and step is not None:
        m = step.baseline_ns
        r = replace(r, baseline_step_ns=m,  # the report's one step time is the measured one
                    findings=[_rebased(f, m) for f in r.findings],
                    below_threshold=[_rebased(f, m) for f in r.below_threshold],
                    combined=_rebase(r.combined, m) if r.combined is not None else None)
        replayed = r.replay.unprofiled_median_ns
        typical = step.median_ns
        if replayed and typical > 0:
            off = (replayed - typical) / typical
            r = replace(r, replay=replace(r.replay, measured_vs_replay=off))
            if abs(off) > MODEL_DISAGREEMENT and not measured.fit_tried:
                warnings = (disagreement(replayed, typical, off, trace_format),)
    extra = list(measured.run_findings)
    acc = measured.run
    if acc is not None:
        acc = replace(acc, total=run_total(acc, r.combined, extra))
    if extra:
        r = replace(r, categories={**r.categories, **RUN_CATEGORIES},
                    findings=sorted(r.findings + extra, key=lambda f: -f.rank_speedup))
    return r, acc, warnings
