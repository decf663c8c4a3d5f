"""The console script ends without Python's teardown where only advisor ran (`advisor.cli.run`):
what it wrote must be complete and its exit code the command's."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import HANG_GUARD_S, ROOT

TRACE = ROOT / "fixtures/scenarios/cpu-bound-loss/bad/trace.json.gz"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "advisor.cli", *args], capture_output=True,
                          text=True, timeout=HANG_GUARD_S, cwd=ROOT)


def test_reports_and_console_are_complete_after_the_fast_exit(tmp_path):
    out = tmp_path / "r.json"
    html = tmp_path / "r.html"
    p = _run("analyze", str(TRACE), "--json", str(out), "--html", str(html))
    assert p.returncode == 0, p.stderr
    assert json.loads(out.read_text())["findings"]
    assert html.read_text().rstrip().endswith("</html>")
    assert "All step fixes together" in p.stdout or "Findings" in p.stdout
    piped = _run("analyze", str(TRACE), "--json", "-")
    assert piped.returncode == 0 and json.loads(piped.stdout)["findings"]


def test_exit_codes_are_the_commands():
    assert _run("analyze", str(ROOT / "no-such-trace.json")).returncode == 2
    assert _run("rules").returncode == 0


def test_teardown_is_kept_where_other_code_ran():
    import threading

    from advisor import cli

    assert cli._may_skip_teardown() is ("torch" not in sys.modules
                                        and "distributed" not in sys.modules
                                        and "dask.distributed" not in sys.modules)
    stop = threading.Event()
    worker = threading.Thread(target=stop.wait)  # a non-daemon thread a normal exit waits for
    worker.start()
    try:
        assert cli._may_skip_teardown() is False
    finally:
        stop.set()
        worker.join()
