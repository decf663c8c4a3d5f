"""`advisor gate` through the CLI's error funnel: one test per exit code and failure cause."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from .conftest import (
    H100_1S,
    HTA_CONTROL,
    HTA_TEST,
    MFU_AFTER,
    MFU_BEFORE,
    NO_STEPS,
    TRACES,
    needs_traces,
    run_cli,
)

pytestmark = needs_traces


def test_the_same_trace_twice_passes():
    r = run_cli(["gate", str(MFU_BEFORE), str(MFU_BEFORE)])
    assert r.exit_code == 0, r.stderr
    assert r.stdout.startswith("advisor gate: PASS")


def test_a_regression_exits_1_and_says_what_and_how_much(tmp_path):
    md, junit, out = tmp_path / "gate.md", tmp_path / "gate.xml", tmp_path / "gate.json"
    r = run_cli(["gate", str(MFU_BEFORE), str(MFU_AFTER), "--markdown", str(md), "--junit",
                 str(junit), "--json", str(out), "--github-annotations"])
    assert r.exit_code == 1, r.stderr
    assert "FAIL" in r.stdout and "step time +15.7%" in r.stdout
    assert "communication: 0.525 -> 1.645 ms" in r.stdout
    assert "::error title=advisor gate%3A step-time regression" in r.stdout
    assert r.stderr == ""
    assert md.read_text().startswith("## ❌")
    assert int(ET.parse(junit).getroot().get("failures")) >= 1
    assert json.loads(out.read_text())["exit_code"] == 1


def test_the_threshold_is_in_percent():
    r = run_cli(["gate", str(MFU_BEFORE), str(MFU_AFTER), "--threshold", "20"])
    assert r.exit_code == 0, r.stdout
    assert "-> unchanged (threshold 20%)" in r.stdout


def test_the_reverse_direction_passes_as_faster():
    r = run_cli(["gate", str(MFU_AFTER), str(MFU_BEFORE)])
    assert r.exit_code == 0
    assert "-> faster" in r.stdout


def test_saved_json_results_gate_like_traces(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert run_cli(["analyze", "-q", "--json", str(a), str(MFU_BEFORE)]).exit_code == 0
    assert run_cli(["analyze", "-q", "--json", str(b), str(MFU_AFTER)]).exit_code == 0
    r = run_cli(["gate", str(a), str(b)])
    assert r.exit_code == 1 and "step time +15.7%" in r.stdout
    assert run_cli(["gate", str(a), str(a)]).exit_code == 0


@pytest.mark.parametrize(
    ("baseline", "candidate", "message"),
    [
        ("missing.sqlite", MFU_BEFORE, "no such file"),
        (TRACES / "SOURCES.md", MFU_BEFORE, "not an Nsight Systems SQLite export"),
        (NO_STEPS, MFU_BEFORE, "no steady-state training steps"),
        (H100_1S, MFU_BEFORE, "different workloads"),
        (HTA_CONTROL, HTA_TEST, "different GPUs"),
        (HTA_CONTROL, MFU_BEFORE, "different profilers"),
    ],
    ids=["missing", "not-a-trace", "no-steps", "different-workload", "different-gpu",
         "different-profiler"],
)
def test_runs_that_cannot_be_compared_exit_2(tmp_path, saved_result, baseline, candidate,
                                            message):
    if baseline == HTA_CONTROL:  # large traces: gate their saved results (analysed once)
        baseline, candidate = saved_result(baseline), saved_result(candidate)
    md, junit = tmp_path / "gate.md", tmp_path / "gate.xml"
    r = run_cli(["gate", str(baseline), str(candidate), "--markdown", str(md), "--junit",
                 str(junit), "--github-annotations"])
    assert r.exit_code == 2
    assert message in r.stderr and r.stderr.count("\n") == 1  # one line, no traceback
    assert "could not compare" in md.read_text()  # CI sees it, not a stale file
    assert ET.parse(junit).getroot().get("errors") == "1"
    assert r.stdout.startswith("::error title=advisor gate%3A could not compare::")


def test_an_unknown_allowed_rule_is_a_usage_error():
    r = run_cli(["gate", str(MFU_BEFORE), str(MFU_BEFORE), "--allow", "no-such-rule"])
    assert r.exit_code == 2 and "unknown rule(s): no-such-rule" in r.stderr


def test_a_subprocess_run_uses_the_real_exit_codes(tmp_path):
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "advisor.cli", "gate", *args],
                              capture_output=True, text=True, timeout=300, check=False)

    broken = tmp_path / "broken.sqlite"
    broken.write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
    r = run(str(broken), str(MFU_BEFORE))
    assert r.returncode == 2 and r.stderr.startswith("advisor: error:") and "Traceback" not in r.stderr
    r = run(str(MFU_BEFORE), str(MFU_AFTER))
    assert r.returncode == 1 and "step time +15.7%" in r.stdout
