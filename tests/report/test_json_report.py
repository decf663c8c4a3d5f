"""The JSON result is the machine contract: schema-valid on every real trace, and honest."""

from __future__ import annotations

import json

import jsonschema
import pytest

from advisor.analysis import analyze
from advisor.report.json_report import SCHEMA_PATH, SCHEMA_VERSION, to_dict
from tests.conftest import SCENARIOS, shared

SCHEMA = json.loads(SCHEMA_PATH.read_text())
TRACES = [
    "nsys-ai/mfu_2gpu_before.sqlite",
    "weatherbench2/report1.sqlite",
    "kineto/tb_plugin_samples/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz",
    "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
]


@pytest.mark.parametrize("rel", TRACES)
def test_output_validates_against_the_published_schema(rel):
    data = to_dict(analyze(shared(rel)))
    jsonschema.validate(data, SCHEMA)
    assert data["schema_version"] == SCHEMA_VERSION == SCHEMA["properties"]["schema_version"]["const"]


def test_findings_are_sorted_and_the_combined_estimate_is_one_replay():
    data = to_dict(analyze(SCENARIOS / "pageable-memcpy" / "bad" / "nsys.sqlite.gz"))
    jsonschema.validate(data, SCHEMA)
    speedups = [f["estimated_speedup"] for f in data["findings"]]
    assert speedups == sorted(speedups, reverse=True)
    assert data["findings"][0]["rule"] == "pageable-memcpy"
    # all fixes together: at least the best single fix
    assert data["estimated_speedup"] >= speedups[0] - 1e-6
    f = data["findings"][0]
    assert f["speedup_low"] <= f["estimated_speedup"] <= f["speedup_high"]
    assert f["predicted_step_ms"] < data["steps"]["median_ms"]
    assert f["fix"]["snippet"] and f["model"] and f["assumptions"]


def test_a_trace_without_kernels_says_so_and_claims_nothing():
    # weatherbench2's capture ended before training: 23 API calls and one memset, no kernel
    data = to_dict(analyze(shared("weatherbench2/report1.sqlite")))
    assert data["trace"]["totals"].get("kernels", 0) == 0
    assert any("no GPU kernels" in n for n in data["trace"]["notes"])
    assert data["findings"] == []
    assert data["estimated_speedup"] == 1.0
    assert {s["rule"] for s in data["skipped"]}  # every rule says why it did not run
