"""Estimates under `advisor profile` are re-expressed against the measured unprofiled step
(the replay's speedup kept), and a replay far from it is a warning (real H100 capture). The
measured step is an input fixed before the rules run: the analysis on the replayed baseline
is left as it was."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from advisor.analysis import AnalysisInput, analyze_input, rule_pass
from advisor.capture.baseline import measured_inputs
from advisor.capture.steptimes import StepClock
from advisor.ingest.base import load_trace
from advisor.report.json_report import to_dict

CAPTURE = Path(__file__).resolve().parents[2] / "fixtures" / "scenarios" / \
    "uncaptured-cuda-graph" / "bad" / "nsys.sqlite.gz"


def _clock(step_ns: int, n: int = 60) -> StepClock:
    """A run whose steps after warm-up (8) and around the window (10-17) take step_ns."""
    times, t = [], 0
    for i in range(n):
        ns = step_ns if i > 3 else 3 * step_ns
        times.append((i, t, t + ns))
        t += ns
    return StepClock(tuple(times), (10, 17), 8, {}, t + 1_000_000)


@pytest.fixture(scope="module")
def replayed():
    inputs = AnalysisInput.of(load_trace(CAPTURE))
    ruled = rule_pass(inputs)
    return inputs, ruled, analyze_input(inputs, ruled)


@pytest.mark.parametrize("ratio, warns", [(1.0, False), (1.3, True)])
def test_estimates_are_rebased_on_the_measured_step(replayed, ratio, warns):
    inputs, ruled, plain = replayed
    before = {f.rule: f.estimate for f in plain.results.findings}
    assert before, "the launch-bound capture has findings"
    measured_ns = int(plain.results.replay.unprofiled_median_ns * ratio)
    fixed = measured_inputs(inputs, _clock(measured_ns))
    assert fixed.calibration == inputs.calibration  # nsys: never fitted (test_refit)
    a = analyze_input(fixed, ruled)
    assert a.measured.median_ns == measured_ns
    for f in a.results.findings:
        e, old = f.estimate, before[f.rule]
        assert e.speedup == old.speedup and e.relative_to == "step"
        base = a.measured.mean_ns if e.basis == "mean" else a.measured.median_ns
        assert e.step_ns == pytest.approx(base)
        assert e.step_ns / e.predicted_step_ns == pytest.approx(old.speedup, rel=1e-9)
    assert bool(a.warnings) == warns
    d = to_dict(a)
    assert d["steps"]["measured"]["median_ms"] == pytest.approx(measured_ns / 1e6, abs=1e-4)
    assert d["model_check"]["measured_vs_replay"] == pytest.approx(1 / ratio - 1, abs=1e-3)
    assert (len(d["warnings"]) == 1) == warns
    # the rule pass and the analysis on the replayed baseline were not written into
    assert {f.rule: f.estimate for f in plain.results.findings} == before
    assert ruled.results.baseline_step_ns == plain.results.baseline_step_ns != a.results.baseline_step_ns
    assert plain.measured is None and plain.warnings == ()


def test_an_analysis_is_never_written_into(replayed):
    a = replayed[2]
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.warnings = ("late",)  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.results.baseline_step_ns = 1.0  # type: ignore[misc]


def test_a_rule_pass_of_other_inputs_is_refused(replayed):
    inputs, ruled, _ = replayed
    other = dataclasses.replace(inputs, calibration=dataclasses.replace(inputs.calibration,
                                                                        call_ns=1))
    with pytest.raises(ValueError, match="other inputs"):
        analyze_input(other, ruled)
    with pytest.raises(ValueError, match="other inputs"):
        analyze_input(dataclasses.replace(inputs, settings=inputs.settings.override(
            select=["host-sync"])), ruled)
