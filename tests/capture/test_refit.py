"""The profiler's costs fitted to the step `advisor profile` measured without the profiler
(`advisor.capture.baseline.refit`), on real H100 captures: the step states the session wrote
(steps outside the window, host clock) and the traces of the same runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.capture.baseline import FIT_TOLERANCE, apply_measured
from advisor.capture.runner import analyze_recorded
from advisor.capture.steptimes import MODEL_DISAGREEMENT, StepClock
from advisor.engine.host import HostFacts
from tests.conftest import ROOT

UNPROFILED = ROOT / "fixtures" / "unprofiled"
KINETO_RUNS = [  # timm train.py resnet18, 2 workers: one replay above the measured step, one below
    UNPROFILED / "h100-2026-11-23" / "res" / "timm-kineto",
    UNPROFILED / "h100-2026-11-23" / "res2" / "timm-long",
]


def profiled(run: Path, trace: str):
    state = json.loads((run / "steps_rank0.json").read_text())["state"]
    analysis = analyze_recorded(run / trace, state["recorded"], facts=HostFacts.from_state(state))
    before = analysis.results.replay.unprofiled_median_ns
    apply_measured(analysis, StepClock.from_state(state))
    return analysis, before


@pytest.mark.parametrize("run", KINETO_RUNS, ids=lambda p: p.name)
def test_a_replay_that_misses_the_measured_step_is_fitted_to_it(run):
    analysis, before = profiled(run, "trace_rank0.json.gz")
    measured = analysis.measured.median_ns
    assert abs(before - measured) / measured > MODEL_DISAGREEMENT  # the calibration missed
    after = analysis.results.replay.unprofiled_median_ns
    assert abs(after - measured) < abs(before - measured)
    if after == pytest.approx(measured, rel=FIT_TOLERANCE):
        assert any("to fit the measured step" in w for w in analysis.warnings)
    else:  # the loader-bound run's unprofiled steps waited longer than any replay: said so
        assert any("the nearest the replay comes" in w for w in analysis.warnings)
    cal = analysis.results.replay.calibration
    assert "scaled x" in cal["measured"] and "measured without the profiler" in cal["measured"]
    assert any("scaled x" in w for w in analysis.warnings)
    # every estimate rests on the fitted replay and on the measured step
    for f in analysis.results.findings:
        if f.estimate.relative_to == "step":
            assert f.estimate.step_ns == pytest.approx(measured)


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
