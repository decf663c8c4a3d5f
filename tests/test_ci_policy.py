"""The CI policy (tests/ci_policy.py) in a real pytest run: a skip fails under CI, a strict xfail
does not, and outside CI a skip is a skip."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CASES = '''
import pytest

def test_passes():
    pass

def test_skips():
    pytest.skip("no such thing here")

@pytest.mark.xfail(strict=True, reason="a measured miss")
def test_strict_xfail():
    assert False
'''


def _run(tmp_path: Path, ci: str | None, module: str = CASES) -> subprocess.CompletedProcess:
    (tmp_path / "test_cases.py").write_text(module)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "tests.ci_policy",
                           "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(tmp_path)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)


def test_under_ci_a_skip_fails_and_a_strict_xfail_does_not(tmp_path):
    run = _run(tmp_path, "true")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "1 failed, 1 passed, 1 xfailed" in run.stdout
    assert "skipped under CI=true" in run.stdout and "no such thing here" in run.stdout


def test_a_module_skipped_at_import_fails_under_ci(tmp_path):
    run = _run(tmp_path, "true", 'import pytest\npytest.importorskip("no_such_module_here")\n'
                                 'def test_never():\n    pass\n')
    assert run.returncode != 0 and "skipped under CI=true" in run.stdout, run.stdout


def test_outside_ci_a_skip_is_a_skip(tmp_path):
    run = _run(tmp_path, None)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed, 1 skipped, 1 xfailed" in run.stdout
