"""`advisor profile` under a scheduler: SIGTERM after the window still gives the analysis, and
output paths are refused before the script runs (tests/capture/scripts, real torch on the CPU)."""

from __future__ import annotations

import json
import signal

import pytest

pytest.importorskip("torch", reason="advisor profile needs torch (the profile extra)")

from tests.capture.test_profile_cpu import SCRIPTS, advisor


def test_sigterm_after_the_window_ends_the_job_and_the_analysis_beside_it_reports(tmp_path):
    p = advisor("profile", "--wait", "2", "--steps", "4", "--out", str(tmp_path / "o"),
                "--json", str(tmp_path / "r.json"), "-q",
                str(SCRIPTS / "train_mlp.py"), "--iters", "40", "--sigterm-at", "12")
    assert p.returncode == -signal.SIGTERM, p.stderr  # killed by the signal, as under python
    assert "Traceback" not in p.stderr and "terminated (SIGTERM)" in p.stderr
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["steps"]["times_ms"], "the recorded window was analysed"


def test_output_paths_are_checked_before_the_script_runs(tmp_path):
    script = tmp_path / "train.py"
    script.write_text((SCRIPTS / "train_mlp.py").read_text())
    before = script.read_bytes()
    p = advisor("profile", "--out", str(tmp_path / "o"), "--json", str(script), str(script))
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().startswith("advisor: error: --json") and "input" in p.stderr
    assert "train_mlp: done" not in p.stdout  # the script never started
    assert script.read_bytes() == before
    p = advisor("profile", "--out", str(tmp_path / "o"), "--html", str(tmp_path), str(script))
    assert p.returncode == 2 and "is a directory" in p.stderr and "train_mlp: done" not in p.stdout
