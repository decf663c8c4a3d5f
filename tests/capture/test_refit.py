"""The profiler's costs fitted to the step `advisor profile` measured without the profiler
(`advisor.capture.baseline.fitted_calibration`) before the rules run, on real H100 captures:
the step states the session wrote (steps outside the window, host clock) and the traces of the
same runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.analysis import analyze_input
from advisor.capture.baseline import FIT_TOLERANCE, measured_inputs, replayed_median
from advisor.capture.reporting import recorded_inputs
from advisor.capture.steptimes import StepClock
from advisor.engine.context import analysed_steps
from advisor.engine.host import HostFacts
from advisor.engine.measured import MODEL_DISAGREEMENT
from tests.archive import readable
from tests.conftest import ROOT

UNPROFILED = ROOT / "fixtures" / "archive" / "unprofiled"
KINETO_RUNS = [  # timm train.py resnet18, 2 workers: one replay above the measured step, one below
    UNPROFILED / "h100-2026-11-23" / "res" / "timm-kineto",
    UNPROFILED / "h100-2026-11-23" / "res2" / "timm-long",
]


def profiled(run: Path, trace: str):
    state = json.loads((run / "steps_rank0.json").read_text())["state"]
    inputs = recorded_inputs(readable(run / trace), state["recorded"],
                             facts=HostFacts.from_state(state))
    # the step replayed with the calibrated costs, as an analysis without the measured step has it
    before = replayed_median(inputs, analysed_steps(inputs.graph), inputs.calibration)
    return analyze_input(measured_inputs(inputs, StepClock.from_state(state))), before


def test_a_replay_that_misses_the_measured_step_is_fitted_to_it():
    """timm's 500-iteration run: the calibrated costs leave the replay 20% above the measured
    step; scaled (x2.02) they fit it, and the estimates rest on that replay."""
    analysis, before = profiled(KINETO_RUNS[1], "trace_rank0.json.gz")
    measured = analysis.measured.median_ns
    assert abs(before - measured) / measured > MODEL_DISAGREEMENT  # the calibration missed
    after = analysis.results.replay.unprofiled_median_ns
    assert after == pytest.approx(measured, rel=FIT_TOLERANCE)
    cal = analysis.results.replay.calibration
    assert "scaled x" in cal["measured"] and "measured without the profiler" in cal["measured"]
    assert any("to fit the measured step" in w for w in analysis.warnings)
    # every estimate rests on the fitted replay and on the measured step: its mean, the step
    # the job pays (the fit itself is typical step against typical step)
    assert analysis.results.baseline_step_ns == pytest.approx(analysis.measured.mean_ns)
    for f in analysis.results.findings:
        if f.estimate.relative_to == "step":
            assert f.estimate.step_ns == pytest.approx(analysis.measured.mean_ns)


def test_a_step_no_profiler_cost_explains_keeps_the_calibrated_analysis():
    """timm's 40-iteration run: its steps outside the window waited for input, so even with no
    profiler cost removed the replay is shorter than the measured step. A factor pegged at 0
    would leave all the profiler's host time in every what-if; the calibrated analysis stays
    and the warning says why."""
    analysis, before = profiled(KINETO_RUNS[0], "trace_rank0.json.gz")
    assert analysis.results.replay.unprofiled_median_ns == before
    assert "scaled x" not in analysis.results.replay.calibration["measured"]
    assert any("no profiler cost explains it" in w for w in analysis.warnings)


def test_nsys_steps_are_not_fitted_to():
    """Outside an nsys window the job still runs under nsys's interception: no refit, and the
    warning says why the measured steps are slower than the replay."""
    run = UNPROFILED / "h100-2026-11-23b" / "nanogpt-nsys"
    analysis, before = profiled(run, "nsys_rank0.sqlite.gz")
    assert analysis.results.replay.unprofiled_median_ns == before
    assert not any("scaled x" in w for w in analysis.warnings)
    measured = analysis.measured.median_ns
    if abs(before - measured) / measured > MODEL_DISAGREEMENT and before < measured:
        assert any("intercepts CUDA calls for the whole run" in w for w in analysis.warnings)
