"""Only `advisor.capture` imports torch, and only when it runs: `advisor analyze` never does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).resolve().parent / "scripts"

# Runs with torch made unimportable (sys.modules["torch"] = None), then checks that nothing
# tried to bring it in another way.
NO_TORCH = """
import sys
sys.modules["torch"] = None
{body}
assert not [m for m, v in sys.modules.items()
            if v is not None and (m == "torch" or m.startswith("torch."))], "torch imported"
"""


def run_without_torch(body: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", NO_TORCH.format(body=body)], capture_output=True,
                          text=True, env=env, timeout=HANG_GUARD_S)


def test_cli_and_capture_package_import_without_torch():
    done = run_without_torch(
        "import advisor.cli, advisor.capture, advisor.commands.profile\n"
        "assert advisor.capture.__all__ == ['phase', 'step']\n"
        "from advisor.cli import main\n"
        "assert main(['profile', '--help']) == 0\n")
    assert done.returncode == 0, done.stderr


def test_profile_without_torch_is_a_clear_error():
    done = run_without_torch(
        f"from advisor.cli import main\n"
        f"rc = main(['profile', {str(SCRIPTS / 'exits.py')!r}])\n"
        f"assert rc == 2, rc\n")
    assert done.returncode == 0, done.stderr
    assert "advisor profile needs PyTorch" in done.stderr


def test_analyze_runs_without_torch(tmp_path):
    pytest.importorskip("torch", reason="the trace to analyse is recorded by advisor profile")
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    rec = subprocess.run([sys.executable, "-m", "advisor.cli", "profile", "--wait", "2",
                          "--steps", "4", "--out", str(tmp_path), "-q",
                          str(SCRIPTS / "exits.py")], capture_output=True, text=True, env=env,
                         timeout=HANG_GUARD_S)
    assert rec.returncode == 3, rec.stderr
    trace = tmp_path / "trace_rank0.json.gz"
    done = run_without_torch(
        f"from advisor.cli import main\n"
        f"rc = main(['analyze', {str(trace)!r}, '-q', '--json', {str(tmp_path / 'a.json')!r}])\n"
        f"assert rc == 0, rc\n")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "a.json").exists()
