"""Put the measured unprofiled step under an `advisor profile` analysis.

The trace says where a profiled step's time goes; the session's host clock says how long the
unprofiled steps really took. Each step-relative estimate keeps the replay's relative saving
(its speedup) and is re-expressed against the measured step, so ``step_ms`` and
``predicted_step_ms`` describe the job as it runs. The replay without the profiler's overhead is
checked against the measured step; a large disagreement is a warning in every report.
"""

from __future__ import annotations

from dataclasses import replace

from advisor.capture.accounting import RUN_CATEGORIES, account, run_findings, run_total
from advisor.capture.steptimes import (
    MODEL_DISAGREEMENT,
    MeasuredStep,
    StepClock,
    measured_step,
)
from advisor.engine.rule import Estimate

NOISY_SLOWER = 1.5
"""Unprofiled steps whose median is this many times the profiled steps' median ran on a host
busy with something else: a profiler only ever adds host time, so an unprofiled step far slower
than a profiled one of the same loop measures the machine's other load, not the job (issue 32:
612 ms measured against 52 ms profiled on a busy 2-core machine)."""

PRECISION_Z = 1.96
"""The measured mean's 95% interval (normal approximation) must lie within the step-time
precision advisor states (`MODEL_DISAGREEMENT`, 10%) for estimates to be built on it."""


def _rebase(e: Estimate, step: float) -> Estimate:
    """One baseline per report: every step-relative estimate is the replay's speedup applied to
    the measured mean step (as `RuleContext.estimate` does with the replayed one)."""
    if e.relative_to != "step" or e.step_ns <= 0:
        return e
    return e.on_step(step)


def noisy_host(measured: MeasuredStep, profiled_median_ns: float) -> str | None:
    """Why the measured steps cannot carry estimates, or None when they can.

    Two signs of a host too noisy to measure on: unprofiled steps far slower than the profiled
    ones (`NOISY_SLOWER`), and a spread too wide for the precision advisor states: the 95%
    interval of the mean wider than `MODEL_DISAGREEMENT` of it. The spread counted is what the
    steps' timed data wait does not explain: a loader-bound job's varying waits are the job's
    own behaviour, which the mean step it pays includes (timm with 2 workers, 15 measured
    steps: a spread of 26% of the step, 12% once the data wait is taken out)."""
    med, mean = measured.median_ns, measured.mean_ns
    if profiled_median_ns > 0 and med > NOISY_SLOWER * profiled_median_ns:
        return (f"the unprofiled steps (median {med / 1e6:.2f} ms) ran {med / profiled_median_ns:.1f}x "
                f"slower than the profiled ones ({profiled_median_ns / 1e6:.2f} ms): a profiler only "
                "adds time, so this host was busy with other work while they ran")
    if measured.count < 2 or mean <= 0:
        return None
    spread = measured.unexplained_stdev_ns
    half = PRECISION_Z * spread / measured.count ** 0.5 / mean
    if half > MODEL_DISAGREEMENT:
        return (f"the {measured.count} unprofiled steps spread too widely (stdev "
                f"{spread / 1e6:.2f} ms, data waits aside, on a mean of {mean / 1e6:.2f} ms): their mean "
                f"is known to +/-{half:.0%}, wider than the {MODEL_DISAGREEMENT:.0%} advisor's "
                "estimates state; run on a quieter host or measure more steps (--then continue)")
    return None


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


FIT_TOLERANCE = 0.03
"""A fitted replay within this fraction of the measured step is said to fit it."""


def refit(analysis, measured_ns: float) -> float | None:
    """Run the rules again with the profiler's costs fitted to the measured step, where the
    replay without the calibrated costs misses it by more than `MODEL_DISAGREEMENT`; returns the
    factor applied (None: no refit was needed; 0.0: none fits, the calibrated analysis stays and
    a warning says why).

    The what-ifs replay the host's time between launches; when the profiler's cost left in it is
    wrong, every fix that frees the host is wrong with it: on HF run_clm.py (GPT-2 bf16,
    torch.compile) the replay kept 93 ms of a step measured at 48.7 ms, and `uncaptured-cuda-graph`
    promised 2.46x for a fix measured at 1.05x; fitted (costs x2.07), 1.29x. Only torch.profiler
    windows: outside an nsys window the steps still run under nsys's interception, so they are
    not the unprofiled step the costs could be fitted to."""
    from advisor.analysis import analyze_graph
    from advisor.engine import profiler_cost

    ctx = analysis.context
    replayed = analysis.results.replay.unprofiled_median_ns
    if (ctx is None or not ctx.steps or analysis.graph.info.format != "kineto-json"
            or not replayed or measured_ns <= 0
            or abs(replayed - measured_ns) / measured_ns <= MODEL_DISAGREEMENT):
        return None
    base = profiler_cost.detect(analysis.graph)
    cal, k = profiler_cost.fit_to_step(analysis.graph, ctx.steps, base, measured_ns)
    head = (f"the replay without the calibrated profiler costs gave {replayed / 1e6:.2f} ms per "
            f"step against {measured_ns / 1e6:.2f} ms measured without the profiler")
    if not 0 < k < profiler_cost.MAX_SCALE:
        # No factor reaches the measured step: what differs is not the profiler's cost (the
        # steps outside the window waited for input, or did other work the window's did not).
        # The calibrated analysis stays; a pegged factor would skew every host-side what-if.
        analysis.warnings.append(
            head + ("; no profiler cost explains it (with none removed the replay is still "
                    "shorter: the steps outside the window waited for input or did other work)"
                    if k <= 0 else
                    f"; even {profiler_cost.MAX_SCALE:g}x the calibrated costs leave the replay "
                    "longer") + "; estimates are relative to the measured step")
        return 0.0
    fresh = analyze_graph(analysis.graph, settings=analysis.settings, facts=ctx.facts,
                          calibration=cal)
    fitted = fresh.results.replay.unprofiled_median_ns or 0.0
    if abs(fitted - measured_ns) / measured_ns > FIT_TOLERANCE:
        analysis.warnings.append(head + f"; the nearest fit (costs x{k:.2f}) gives "
                                 f"{fitted / 1e6:.2f} ms, so the calibrated analysis stays; "
                                 "estimates are relative to the measured step")
        return 0.0
    if analysis.source is not None and fresh.source is None:
        fresh.source = analysis.source
    analysis.results, analysis.summary, analysis.context = fresh.results, fresh.summary, fresh.context
    analysis.source = fresh.source
    analysis.warnings.append(head + f"; the costs were scaled x{k:.2f} to fit the measured step, "
                             "and the estimates rest on that replay")
    return k


def apply_measured(analysis, clock: StepClock) -> None:
    """Attach the measured step and the whole-run account; rebase the estimates on them."""
    measured = measured_step(clock)
    acc = account(clock, measured)
    if measured is not None and analysis.context is not None and analysis.context.steps:
        why = noisy_host(measured, analysis.context.median_step_ns)
        if why is not None:
            measured = replace(measured, noisy=why)
            analysis.warnings.append(
                "host too noisy to measure on: " + why + "; no estimate is built on the "
                "measured step: estimates stay relative to the trace's own step")
    analysis.measured = measured
    analysis.run = acc
    usable = measured is not None and measured.noisy is None
    # The refit calibrates the profiler's per-event costs: typical step against typical step
    # (medians), so that a bursty job's slow steps, which a window may not hold, do not bend
    # them; the estimates are then applied to the mean step the job pays.
    k = refit(analysis, measured.median_ns) if usable else None
    r = analysis.results
    if usable:
        m = measured.baseline_ns
        r.baseline_step_ns = m  # the report's one step time is the measured one
        r.findings = [replace(f, estimate=_rebase(f.estimate, m)) for f in r.findings]
        r.below_threshold = [replace(f, estimate=_rebase(f.estimate, m)) for f in r.below_threshold]
        if r.combined is not None:
            r.combined = _rebase(r.combined, m)
        replayed = r.replay.unprofiled_median_ns
        typical = measured.median_ns
        if replayed and typical > 0:
            off = (replayed - typical) / typical
            r.replay = replace(r.replay, measured_vs_replay=off)
            if abs(off) > MODEL_DISAGREEMENT and k is None:  # a refit has said it already
                analysis.warnings.append(disagreement(replayed, typical, off,
                                                      analysis.graph.info.format))
    extra = run_findings(acc)
    if acc is not None:
        acc.total = run_total(acc, r.combined, extra)
    if extra:
        r.categories.update(RUN_CATEGORIES)
        r.findings = sorted(r.findings + extra, key=lambda f: -f.estimate.speedup)
