"""The measured unprofiled step on real H100 runs (fixtures/archive/unprofiled/h100-2026-11-23: public
scripts run unmodified under `advisor profile`): today's `advisor.capture.steptimes` over the step
clock those runs recorded must agree with each script's own log of the same run, and the
analysis beside the job must have reported while the job still ran. No torch needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.capture.steptimes import StepClock, measured_step
from tests.capture.step_clock_data import _script_figure, _window, fit_overheads, measure

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "fixtures" / "archive" / "unprofiled" / "h100-2026-11-23"

RUNS = [("res/nanogpt-kineto", "nanogpt"), ("res2/timm-long", "timm"),
        ("../h100-2026-11-23b/nanogpt-kineto", "nanogpt")]  # second pass, after the CUPTI teardown


@pytest.mark.parametrize(("run", "kind"), RUNS)
def test_measured_step_agrees_with_the_scripts_own_log_of_the_same_run(run, kind):
    d = DATA / run
    state = json.loads((d / "steps_rank0.json").read_text())["state"]
    m = measured_step(StepClock.from_state(state))
    own = _script_figure(d, kind, _window(d))
    assert m is not None and own is not None
    assert m.count >= 300
    assert abs(m.median_ns / 1e6 - own["median_ms"]) / own["median_ms"] < 0.05


def test_the_reports_were_written_while_the_long_epoch_ran():
    r = measure(DATA / "res2" / "timm-long")
    assert r["job_ran_on_after_reports_s"] > 5
    assert r["window_closed_to_reports_s"] < 10
    assert r["steps_during"] > 20 and r["steps_after"] > 100


def test_the_calibration_fit_quoted_in_the_docs_comes_from_the_saved_rows():
    """docs/validation.md and profiler_cost quote 13.6 and 9.6 us per CUDA call for nsys with and
    without the OS-runtime/cuBLAS/cuDNN APIs: the fit over the second pass's saved rows
    (what `python benchmarks/unprofiled_check.py fit --rows ...` prints)."""
    rows = ROOT / "fixtures" / "archive" / "unprofiled" / "h100-2026-11-23b" / "fit_rows.json"
    fitted = fit_overheads(json.loads(rows.read_text())["rows"])
    assert round(fitted["nsys"][1][0]) == 13588 and round(fitted["nsys-lean"][1][0]) == 9568
