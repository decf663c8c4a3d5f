"""The analysis beside the job (issue 20): reports while a real training job still runs, the job's
exit code and output unchanged, --then stop, --window-at, interruptions before and after the
window (tests/capture/scripts/train_for.py: a real MLP loop on the CPU build of torch).

``ADVISOR_TEST_JOB_SECONDS`` sets how long the long job trains (default 20 s, enough for the
window, the analysis and the first report to happen while it runs on a 2-core CI machine)."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="advisor profile needs torch (the profile extra)")

from advisor.capture.after_window import default_then, parse_window_at
from advisor.errors import CaptureError
from tests.capture.test_profile_cpu import SCRIPTS, _env, advisor
from tests.conftest import HANG_GUARD_S

JOB_SECONDS = float(os.environ.get("ADVISOR_TEST_JOB_SECONDS", "20"))
DONE_LINE = re.compile(r"^train_for: done \d+ steps in [\d.]+ s$")


def _start(tmp_path, *advisor_args: str, seconds: float, exit_code: int = 0,
           new_session: bool = False) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "advisor.cli", "profile", *advisor_args, "--out",
           str(tmp_path / "o"), "--json", str(tmp_path / "r.json"),
           str(SCRIPTS / "train_for.py"), "--seconds", str(seconds), "--width", "64",
           "--exit-code", str(exit_code)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env(), start_new_session=new_session)


def _wait_for(path, proc: subprocess.Popen, timeout: float) -> bool:
    end = time.time() + timeout
    while time.time() < end:
        if path.exists():
            return True
        if proc.poll() is not None:
            return path.exists()
        time.sleep(0.2)
    return False


def test_reports_are_written_while_the_job_still_runs(tmp_path):
    proc = _start(tmp_path, "--then", "continue", "--wait", "3", "--steps", "4",
                  seconds=JOB_SECONDS, exit_code=3)
    status = tmp_path / "o" / "background_rank0.json"
    report = tmp_path / "r.json"
    try:
        assert _wait_for(report, proc, JOB_SECONDS + HANG_GUARD_S)
        still_running = proc.poll() is None
        early = json.loads(report.read_text())
    finally:
        out, err = proc.communicate(timeout=HANG_GUARD_S)
    assert still_running, "the report came only after the job ended"
    assert early["steps"]["count"] == 4
    assert early["steps"]["measured"]["count"] >= 10  # the steps timed after the window
    # the analysis beside the job has what the session recorded about the script and the host
    # (its imports, its cores), as the in-process analysis does: not the trace-only default
    assert early["framework"]["source"] == "script", early["framework"]
    # the job's own exit code and stdout, as `python train_for.py` gives them
    assert proc.returncode == 3, err
    assert [ln for ln in out.splitlines() if ln.strip()] and all(
        DONE_LINE.match(ln) for ln in out.splitlines() if ln.strip()), out
    st = json.loads(status.read_text())
    assert st["state"] == "done" and st["whole_run"] is True
    final = json.loads(report.read_text())
    assert final["steps"]["measured"]["count"] > early["steps"]["measured"]["count"]
    assert final["run"]["steps"] >= final["steps"]["measured"]["count"]
    assert final["run"]["run_ms"] >= JOB_SECONDS * 1e3  # the whole run, to the job's end
    assert "Traceback" not in err


def test_then_stop_ends_the_job_after_the_window_with_a_report(tmp_path):
    proc = _start(tmp_path, "--then", "stop", "--wait", "3", "--steps", "4", seconds=600)
    out, err = proc.communicate(timeout=HANG_GUARD_S)
    assert proc.returncode == 0, err
    assert "stopped after the recorded window (--then stop)" in err
    assert "train_for: done" not in out  # the loop did not run to its end
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["steps"]["count"] == 4
    assert data["steps"]["measured"]["count"] >= 15  # 20 timed after the window, less outliers
    assert not (tmp_path / "o" / "background_rank0.json").exists()  # analysed in the job


def test_then_stop_is_a_clean_stop_when_the_script_exits_on_the_interrupt(tmp_path):
    # Lightning ends fit gracefully on a KeyboardInterrupt and exits 1: advisor's stop is not
    # the job failing
    cmd = [sys.executable, "-m", "advisor.cli", "profile", "-q", "--then", "stop", "--wait", "3",
           "--steps", "4", "--out", str(tmp_path / "o"), "--json", str(tmp_path / "r.json"),
           str(SCRIPTS / "train_for.py"), "--seconds", "600", "--width", "64",
           "--exit-on-interrupt", "1"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=HANG_GUARD_S)
    assert p.returncode == 0, p.stderr
    assert "train_for: interrupted, shutting down" in p.stderr
    assert "(--then stop); the script exited with 1 on the interrupt" in p.stderr
    assert json.loads((tmp_path / "r.json").read_text())["steps"]["count"] == 4


def test_window_at_a_time_starts_recording_after_it(tmp_path):
    proc = _start(tmp_path, "--then", "stop", "--window-at", "3s", "--steps", "4", seconds=600)
    _, err = proc.communicate(timeout=HANG_GUARD_S)
    assert proc.returncode == 0, err
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["steps"]["count"] == 4
    first = data["steps"]["measured"]["first_step"]
    assert first is not None and first > 5  # recorded after 3 s, not at the settle point


def test_interrupting_the_job_before_the_window_says_why_there_is_no_report(tmp_path):
    p = advisor("profile", "--wait", "30", "--steps", "4", "--out", str(tmp_path / "o"),
                "--json", str(tmp_path / "r.json"), str(SCRIPTS / "train_mlp.py"),
                "--iters", "50", "--sigterm-at", "10")
    assert p.returncode == -signal.SIGTERM, p.stderr  # ended by the signal, as under python
    assert ("interrupted (SIGTERM) after 9 complete steps, before the recorded window "
            "(steps 30-33) had closed") in p.stderr
    assert not (tmp_path / "r.json").exists() and "Traceback" not in p.stderr


def test_ctrl_c_of_the_whole_job_after_the_window_leaves_a_complete_analysis(tmp_path):
    # Ctrl-C at a terminal signals the job's whole process group; the analysis, in its own
    # session, is not in it and finishes its reports.
    proc = _start(tmp_path, "--then", "continue", "--wait", "3", "--steps", "4", seconds=600,
                  new_session=True)
    handoff = tmp_path / "o" / "handoff_rank0.json"
    try:
        assert _wait_for(handoff, proc, HANG_GUARD_S), "the window never closed"
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=HANG_GUARD_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["steps"]["count"] == 4 and data["findings"] is not None
    st = json.loads((tmp_path / "o" / "background_rank0.json").read_text())
    assert st["state"] == "done"


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_default_after_the_window_is_stop_at_a_terminal_and_continue_elsewhere():
    assert default_then({}, _Tty(), _Tty()) == "stop"
    assert default_then({"CI": "true"}, _Tty(), _Tty()) == "continue"
    assert default_then({}, io.StringIO(), _Tty()) == "continue"  # stdin from a pipe or a file
    assert default_then({}, _Tty(), io.StringIO()) == "continue"  # stderr to a log file
    assert default_then({"CI": "false"}, _Tty(), _Tty()) == "stop"


def test_window_at_parses_steps_and_times():
    assert parse_window_at("500") == (500, None)
    assert parse_window_at("90s") == (None, 90.0)
    assert parse_window_at("5m") == (None, 300.0)
    assert parse_window_at("1.5h") == (None, 5400.0)
    for bad in ("", "5x", "-3", "m5", "1e3s"):
        with pytest.raises(CaptureError):
            parse_window_at(bad)


def test_window_at_and_wait_together_are_refused_before_the_script_runs(tmp_path):
    p = advisor("profile", "--wait", "3", "--window-at", "5s", "--out", str(tmp_path / "o"),
                str(SCRIPTS / "train_mlp.py"))
    assert p.returncode == 2 and p.stderr.startswith("advisor: error: --wait and --window-at")
    assert "train_mlp: done" not in p.stdout


def test_a_job_that_exited_unreaped_is_not_alive():
    # The analysis beside the job waits while the job is alive; an exited job that its parent
    # has not reaped yet (a zombie) answered kill(pid, 0) like a live one, and under load the
    # analysis of a Ctrl-C'd job waited for it until the test's 900 s guard (CI, 2026-11-26).
    from advisor.capture.background import process_alive

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        end = time.time() + 60
        while time.time() < end:
            state = Path(f"/proc/{child.pid}/stat").read_text().rpartition(")")[2].split()[0]
            if state == "Z":
                break
            time.sleep(0.05)
        assert state == "Z"  # exited, not reaped: the case
        assert not process_alive(child.pid)
    finally:
        child.wait()
    assert process_alive(os.getpid())
