"""`advisor gate` through the CLI's error funnel: one test per exit code and failure cause."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from tests.conftest import HANG_GUARD_S

from .conftest import (
    H100_1S,
    HTA_CONTROL,
    HTA_TEST,
    MFU_AFTER,
    MFU_BEFORE,
    NO_STEPS,
    SCENARIOS,
    TRACES,
    needs_traces,
    run_cli,
)

pytestmark = needs_traces


# A real H100 pair whose steps carry a verdict: the host-sync scenario, fixed and planted.
GOOD = SCENARIOS / "host-sync" / "good" / "nsys.sqlite.gz"
BAD = SCENARIOS / "host-sync" / "bad" / "nsys.sqlite.gz"


def test_the_same_trace_twice_passes():
    r = run_cli(["gate", str(GOOD), str(GOOD)])
    assert r.exit_code == 0, r.stderr
    assert r.stdout.startswith("advisor gate: PASS")


def test_a_regression_exits_1_and_says_what_and_how_much(tmp_path):
    md, junit, out = tmp_path / "gate.md", tmp_path / "gate.xml", tmp_path / "gate.json"
    r = run_cli(["gate", str(GOOD), str(BAD), "--markdown", str(md), "--junit",
                 str(junit), "--json", str(out), "--github-annotations"])
    assert r.exit_code == 1, r.stderr
    assert "FAIL" in r.stdout and "step time +60.9%" in r.stdout
    assert "host-sync (HOST001): new finding" in r.stdout
    assert "::error title=advisor gate%3A step-time regression" in r.stdout
    assert r.stderr == ""
    assert md.read_text().startswith("## ❌")
    assert int(ET.parse(junit).getroot().get("failures")) >= 1
    assert json.loads(out.read_text())["exit_code"] == 1


def test_the_threshold_is_in_percent():
    r = run_cli(["gate", str(GOOD), str(BAD), "--threshold", "100"])
    assert "-> unchanged (threshold 100%)" in r.stdout
    assert r.exit_code == 1  # the new host syncs fail on their own, whatever the threshold


def test_the_reverse_direction_passes_as_faster():
    r = run_cli(["gate", str(BAD), str(GOOD)])
    assert r.exit_code == 0
    assert "-> faster" in r.stdout


def test_saved_json_results_gate_like_traces(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert run_cli(["analyze", "-q", "--json", str(a), str(GOOD)]).exit_code == 0
    assert run_cli(["analyze", "-q", "--json", str(b), str(BAD)]).exit_code == 0
    r = run_cli(["gate", str(a), str(b)])
    assert r.exit_code == 1 and "step time +60.9%" in r.stdout
    assert run_cli(["gate", str(a), str(a)]).exit_code == 0


@pytest.mark.parametrize("allow", [[], ["--allow", "host-sync"]], ids=["plain", "allow-host-sync"])
def test_the_fsdp_pair_is_refused_a_verdict(allow):
    """nsys-ai's FSDP captures hold less than one training step: no verdict, allowed or not."""
    r = run_cli(["gate", str(MFU_BEFORE), str(MFU_AFTER), *allow])
    assert r.exit_code == 2
    assert "its steps cannot carry a verdict" in r.stderr
    assert "less than one period of the training loop" in r.stderr
    assert "INCONCLUSIVE" in r.stdout


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
    r = run_cli(["gate", str(GOOD), str(GOOD), "--allow", "no-such-rule"])
    assert r.exit_code == 2 and "unknown rule(s): no-such-rule" in r.stderr


def test_a_subprocess_run_uses_the_real_exit_codes(tmp_path):
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "advisor.cli", "gate", *args],
                              capture_output=True, text=True, timeout=HANG_GUARD_S, check=False)

    broken = tmp_path / "broken.sqlite"
    broken.write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
    r = run(str(broken), str(MFU_BEFORE))
    assert r.returncode == 2 and r.stderr.startswith("advisor: error:") and "Traceback" not in r.stderr
    r = run(str(GOOD), str(BAD))
    assert r.returncode == 1 and "step time +60.9%" in r.stdout
