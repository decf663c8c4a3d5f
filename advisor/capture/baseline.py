"""The measured baseline of an `advisor profile` analysis, fixed before the rules run.

The trace says where a profiled step's time goes; the session's host clock says how long the
unprofiled steps really took. From the session's step clock this module builds the analysis
inputs' `MeasuredBaseline` (the measured step, the whole run's account and its findings) and
chooses the calibration the replays remove: the calibrated profiler costs, or those costs
fitted to the measured step where the replay without them misses it. `advisor.analysis` then
puts every estimate on the measured step (`advisor.engine.measured.on_measured`); a host too
noisy to measure on, or a replay that cannot be fitted, is a warning in every report.
"""

from __future__ import annotations

import statistics
from dataclasses import replace

from advisor.analysis import AnalysisInput
from advisor.capture.accounting import account, epoch_restarts, run_findings
from advisor.capture.steptimes import StepClock, measured_step
from advisor.engine.context import RuleContext, analysed_steps
from advisor.engine.measured import MODEL_DISAGREEMENT, MeasuredBaseline, MeasuredStep
from advisor.engine.profiler_cost import Calibration
from advisor.engine.profiler_fit import MAX_SCALE, fit_to_step
from advisor.graph.model import Step

NOISY_SLOWER = 1.5
"""Unprofiled steps whose median is this many times the profiled steps' median ran on a host
busy with something else: a profiler only ever adds host time, so an unprofiled step far slower
than a profiled one of the same loop measures the machine's other load, not the job (issue 32:
612 ms measured against 52 ms profiled on a busy 2-core machine)."""

PRECISION_Z = 1.96
"""The measured mean's 95% interval (normal approximation) must lie within the step-time
precision advisor states (`MODEL_DISAGREEMENT`, 10%) for estimates to be built on it."""


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


FIT_TOLERANCE = 0.03
"""A fitted replay within this fraction of the measured step is said to fit it."""


def replayed_median(inputs: AnalysisInput, steps: list[Step], cal: Calibration) -> float | None:
    """The median step replayed with ``cal`` removed, exactly as the analysis replays it (its
    JSON ``model_check.unprofiled_median_ns``); None where the analysis replays nothing."""
    if not (steps and inputs.graph.has_gpu_work):
        return None
    return RuleContext(inputs.graph, steps, facts=inputs.facts, calibration=cal).baseline.median_ns


def fitted_calibration(inputs: AnalysisInput, steps: list[Step],
                       measured_ns: float) -> tuple[Calibration, str] | None:
    """The calibration to analyse with and the warning that says why, where the replay without
    the inputs' calibrated costs misses the measured step by more than `MODEL_DISAGREEMENT`;
    None: no fit is needed. The fitted costs where a factor brings the replay within
    `FIT_TOLERANCE` of the step, else the calibrated ones (the warning says none fits).

    The what-ifs replay the host's time between launches; when the profiler's cost left in it is
    wrong, every fix that frees the host is wrong with it: on HF run_clm.py (GPT-2 bf16,
    torch.compile) the replay kept 93 ms of a step measured at 48.7 ms, and `uncaptured-cuda-graph`
    promised 2.46x for a fix measured at 1.05x; fitted (costs x2.07), 1.29x. Only torch.profiler
    windows: outside an nsys window the steps still run under nsys's interception, so they are
    not the unprofiled step the costs could be fitted to."""
    graph, base = inputs.graph, inputs.calibration
    if not steps or graph.info.format != "kineto-json" or measured_ns <= 0:
        return None
    replayed = replayed_median(inputs, steps, base)
    if not replayed or abs(replayed - measured_ns) / measured_ns <= MODEL_DISAGREEMENT:
        return None
    cal, k = fit_to_step(graph, steps, base, measured_ns)
    head = (f"the replay without the calibrated profiler costs gave {replayed / 1e6:.2f} ms per "
            f"step against {measured_ns / 1e6:.2f} ms measured without the profiler")
    if not 0 < k < MAX_SCALE:
        # No factor reaches the measured step: what differs is not the profiler's cost (the
        # steps outside the window waited for input, or did other work the window's did not).
        # The calibrated costs stay; a pegged factor would skew every host-side what-if.
        return base, head + (
            "; no profiler cost explains it (with none removed the replay is still "
            "shorter: the steps outside the window waited for input or did other work)"
            if k <= 0 else
            f"; even {MAX_SCALE:g}x the calibrated costs leave the replay "
            "longer") + "; estimates are relative to the measured step"
    fitted = replayed_median(inputs, steps, cal) or 0.0
    if abs(fitted - measured_ns) / measured_ns > FIT_TOLERANCE:
        return base, (head + f"; the nearest fit (costs x{k:.2f}) gives {fitted / 1e6:.2f} ms, "
                      "so the calibrated analysis stays; estimates are relative to the "
                      "measured step")
    return cal, (head + f"; the costs were scaled x{k:.2f} to fit the measured step, and the "
                 "estimates rest on that replay")


def measured_inputs(inputs: AnalysisInput, clock: StepClock) -> AnalysisInput:
    """``inputs`` with the baseline the session measured: the unprofiled step and the whole
    run's account, and the calibration chosen against that step."""
    measured: MeasuredStep | None = measured_step(clock)
    loader = inputs.facts.loader_run
    acc = account(clock, measured, loader)
    notes = list(inputs.notes)
    steps = analysed_steps(inputs.graph)
    if measured is not None and steps:
        why = noisy_host(measured, float(statistics.median(s.time_ns for s in steps)))
        if why is not None:
            measured = replace(measured, noisy=why)
            notes.append("host too noisy to measure on: " + why + "; no estimate is built on "
                         "the measured step: estimates stay relative to the trace's own step")
    calibration, fit = inputs.calibration, None
    if measured is not None and measured.noisy is None:
        # The fit calibrates the profiler's per-event costs: typical step against typical step
        # (medians), so that a bursty job's slow steps, which a window may not hold, do not bend
        # them; the estimates are then applied to the mean step the job pays.
        fit = fitted_calibration(inputs, steps, measured.median_ns)
        if fit is not None:
            calibration = fit[0]
            notes.append(fit[1])
    found = run_findings(acc, epoch_restarts(clock, loader))
    baseline = MeasuredBaseline(measured, acc, tuple(found), fit_tried=fit is not None)
    return replace(inputs, calibration=calibration, measured=baseline, notes=tuple(notes))
