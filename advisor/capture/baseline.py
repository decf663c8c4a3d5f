"""Put the measured unprofiled step under an `advisor profile` analysis.

The trace says where a profiled step's time goes; the session's host clock says how long the
unprofiled steps really took. Each step-relative estimate keeps the replay's relative saving
(its speedup) and is re-expressed against the measured step, so ``step_ms`` and
``predicted_step_ms`` describe the job as it runs. The replay without the profiler's overhead is
checked against the measured step; a large disagreement is a warning in every report.
"""

from __future__ import annotations

from dataclasses import replace

from advisor.capture.accounting import RUN_CATEGORIES, account, run_findings
from advisor.capture.steptimes import MODEL_DISAGREEMENT, StepClock, measured_step
from advisor.engine.rule import Estimate


def _rebase(e: Estimate, median: float) -> Estimate:
    """One baseline per report: every step-relative estimate, a mean-basis one too, is the
    replay's speedup applied to the measured median step (as `RuleContext.estimate` does with
    the replayed one)."""
    if e.relative_to != "step" or e.step_ns <= 0:
        return e
    factor = median / e.step_ns
    return replace(e, step_ns=median, predicted_step_ns=e.predicted_step_ns * factor)


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


def apply_measured(analysis, clock: StepClock) -> None:
    """Attach the measured step and the whole-run account; rebase the estimates on them."""
    measured = measured_step(clock)
    acc = account(clock, measured)
    analysis.measured = measured
    analysis.run = acc
    r = analysis.results
    if measured is not None:
        m = measured.median_ns
        r.baseline_step_ns = m  # the report's one step time is the measured one
        r.findings = [replace(f, estimate=_rebase(f.estimate, m)) for f in r.findings]
        r.below_threshold = [replace(f, estimate=_rebase(f.estimate, m)) for f in r.below_threshold]
        if r.combined is not None:
            r.combined = _rebase(r.combined, m)
        replayed = r.replay.unprofiled_median_ns
        if replayed:
            off = (replayed - m) / m
            r.replay = replace(r.replay, measured_vs_replay=off)
            if abs(off) > MODEL_DISAGREEMENT:
                analysis.warnings.append(disagreement(replayed, m, off, analysis.graph.info.format))
    extra = run_findings(acc)
    if extra:
        r.categories.update(RUN_CATEGORIES)
        r.findings = sorted(r.findings + extra, key=lambda f: -f.estimate.speedup)
