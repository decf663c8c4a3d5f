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
from advisor.capture.steptimes import MODEL_DISAGREEMENT, StepClock, measured_step
from advisor.engine.rule import Estimate


def _rebase(e: Estimate, median: float) -> Estimate:
    """One baseline per report: every step-relative estimate, a mean-basis one too, is the
    replay's speedup applied to the measured median step (as `RuleContext.estimate` does with
    the replayed one)."""
    if e.relative_to != "step" or e.step_ns <= 0:
        return e
    return e.on_step(median)


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
    analysis.measured = measured
    analysis.run = acc
    k = refit(analysis, measured.median_ns) if measured is not None else None
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
            if abs(off) > MODEL_DISAGREEMENT and k is None:  # a refit has said it already
                analysis.warnings.append(disagreement(replayed, m, off, analysis.graph.info.format))
    extra = run_findings(acc)
    if acc is not None:
        acc.total = run_total(acc, r.combined, extra)
    if extra:
        r.categories.update(RUN_CATEGORIES)
        r.findings = sorted(r.findings + extra, key=lambda f: -f.estimate.speedup)
