"""Gate inputs: a trace and its saved JSON result give the same input; older or foreign JSON is
handled plainly; the JSON result still satisfies its schema with the gate's keys added."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from advisor.errors import InputError, TraceFormatError
from advisor.gate.inputs import load_input
from advisor.report.json_report import SCHEMA_PATH

from .conftest import HTA_TEST, MFU_BEFORE, needs_traces, run_cli

pytestmark = needs_traces


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("json") / "before.json"
    assert run_cli(["analyze", "-q", "--json", str(out), str(MFU_BEFORE)]).exit_code == 0
    return out


def test_a_saved_result_reads_exactly_like_its_trace(saved, gate_input):
    from_trace = gate_input(MFU_BEFORE)
    from_json = load_input(saved)
    assert from_json.kind == "json" and from_trace.kind == "trace"
    for field in ("trace_format", "gpus", "step_times_ms", "gpu_busy_ms", "counts",
                  "launch_interval_ms", "categories_ms", "kernels", "findings", "phases_ms"):
        assert getattr(from_json, field) == getattr(from_trace, field), field


def test_the_result_with_gate_keys_matches_its_schema(saved):
    jsonschema = pytest.importorskip("jsonschema")
    data = json.loads(saved.read_text())
    jsonschema.validate(data, json.loads(SCHEMA_PATH.read_text()))
    steps = data["steps"]
    assert len(steps["steady_times_ms"]) == steps["analysed"] == len(steps["gpu_busy_times_ms"])
    assert set(steps["counts_per_step"]) >= {"launches", "sync_calls", "pageable_copies",
                                             "graph_launches"}
    assert data["kernels"]["all"] and "below_threshold" in data


def test_a_gzipped_result_is_read(saved, tmp_path):
    gz = tmp_path / "before.json.gz"
    gz.write_bytes(gzip.compress(saved.read_bytes()))
    assert load_input(gz).step_times_ms == load_input(saved).step_times_ms


def test_an_older_result_degrades_with_a_note(saved, tmp_path):
    data = json.loads(saved.read_text())
    for key in ("steady_times_ms", "gpu_busy_times_ms", "counts_per_step", "launch_interval_ms"):
        del data["steps"][key]
    del data["kernels"]["all"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data, indent=2))
    x = load_input(old)
    warm = data["steps"]["warmup"]
    assert list(x.step_times_ms) == data["steps"]["times_ms"][warm:]
    assert not x.kernels_complete and not x.counts
    assert any("predates `advisor gate`" in n for n in x.notes)


def test_another_major_schema_version_is_refused(saved, tmp_path):
    data = json.loads(saved.read_text())
    data["schema_version"] = "2.0"
    future = tmp_path / "future.json"
    future.write_text(json.dumps(data, indent=2))
    with pytest.raises(InputError, match=r"schema 2\.0"):
        load_input(future)


def test_a_truncated_result_is_a_format_error(saved, tmp_path):
    cut = tmp_path / "cut.json"
    cut.write_text(saved.read_text()[:2000])
    with pytest.raises(TraceFormatError, match="unreadable advisor result"):
        load_input(cut)


def test_a_torch_profiler_trace_is_not_taken_for_a_result():
    from advisor.gate.inputs import is_advisor_result

    assert not is_advisor_result(HTA_TEST)
