"""The profiler-overhead calibration: detected per profiler and configuration, stated in the
JSON, and only ever taking host time out (real H100 captures)."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.analysis import analyze
from advisor.engine.context import analysed_steps
from advisor.engine.profiler_cost import (
    CALIBRATIONS,
    NO_CALIBRATION,
    detect,
    per_step_counts,
)
from advisor.engine.profiler_fit import replay_median_ns
from advisor.report.json_report import to_dict
from tests.archive import readable

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "scenarios"
CAPTURE = FIXTURES / "uncaptured-cuda-graph" / "bad"


@pytest.mark.parametrize("name, profiler, config", [
    ("nsys.sqlite.gz", "nsys", "cuda,nvtx,osrt,cublas,cudnn"),
    ("trace.json.gz", "torch.profiler", "shapes"),
    # captured with `-t cuda,nvtx` (advisor profile --nsys's default since the second pass)
    ("../../../archive/unprofiled/h100-2026-11-23b/nanogpt-nsys-lean/nsys_rank0.sqlite.gz", "nsys",
     "cuda,nvtx"),
])
def test_calibration_is_detected_and_stated(name, profiler, config):
    a = analyze(readable((CAPTURE / name).resolve()))
    cal = detect(a.graph)
    assert (cal.profiler, cal.config) == (profiler, config)
    assert cal == CALIBRATIONS[(profiler, config)]
    assert to_dict(a)["model_check"]["calibration"] == cal.to_dict()


@pytest.mark.parametrize("name", ["nsys.sqlite.gz", "trace.json.gz"])
def test_removal_shortens_a_launch_bound_step_by_its_event_counts(name):
    a = analyze(CAPTURE / name)
    cal = detect(a.graph)
    steps = analysed_steps(a.graph)
    counts = per_step_counts(a.graph, steps)
    assert counts["launches"] >= 100  # hundreds of kernels per step: launch-bound
    raw = replay_median_ns(a.graph, NO_CALIBRATION)
    removed = raw - replay_median_ns(a.graph, cal)
    # every microsecond of host time is step time here: what comes out is about the
    # per-event costs times the events (less where a call was already at its floor)
    expected = counts["calls"] * cal.call_ns + counts["ops"] * cal.op_ns
    assert 0.5 * expected <= removed <= 1.05 * expected
