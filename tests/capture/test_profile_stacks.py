"""`advisor profile` records Python stacks in its window and names the user's lines (CPU run of
a real loop; the H100 captures are checked in tests/graph/test_source_lines.py)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests.conftest import HANG_GUARD_S

pytest.importorskip("torch", reason="advisor profile needs torch (the profile extra)")

import os
import subprocess
import sys

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).resolve().parent / "scripts" / "batch_between.py"


def advisor(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "advisor.cli", *args], capture_output=True,
                          text=True, env=env, timeout=HANG_GUARD_S)


def _loop_line(text: str, needle: str) -> int:
    """The line of ``needle`` inside the script's for-loop (the second get_batch() call)."""
    hits = [n for n, line in enumerate(text.splitlines(), 1) if needle in line]
    return hits[-1]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = {}
    for flag in ("--stacks", "--no-stacks"):
        d = tmp_path_factory.mktemp(flag.strip("-"))
        done = advisor("profile", flag, "--wait", "3", "--steps", "5", "--out", str(d),
                       "--json", str(d / "report.json"), str(SCRIPT))
        assert done.returncode == 0, done.stderr
        out[flag] = (d, json.loads((d / "report.json").read_text()), done.stderr)
    return out


def test_stacks_are_recorded_and_the_batch_fetch_is_named(runs):
    d, report, _ = runs["--stacks"]
    with gzip.open(d / "trace_rank0.json.gz", "rt") as f:
        assert '"python_function"' in f.read()
    src = report["source"]
    assert src["stacks"] is True
    loss = [p for p in src["phases"] if p["phase"] == "loss"]
    total = sum(p["ms_per_step"] for p in loss)
    fetch = [p for p in loss if p["function"] and p["function"]["function"] == "get_batch"]
    # the hooks call this span 'loss' (forward returned, backward not started): by code, it
    # is the batch fetch (4 ms of sleep against a tiny loss)
    assert fetch and fetch[0]["ms_per_step"] >= 0.6 * total
    assert fetch[0]["function"]["file"] == "batch_between.py"
    top = src["host"][0]
    assert top["function"] == "get_batch" and top["file"] == "batch_between.py"
    line = _loop_line(SCRIPT.read_text(), "x, y = get_batch()")
    assert top["called_from"]["function"] == "main"
    assert top["called_from"]["call_line"] == line  # read from the script: the loop's call


def test_no_stacks_records_none_and_says_so(runs):
    d, report, _ = runs["--no-stacks"]
    with gzip.open(d / "trace_rank0.json.gz", "rt") as f:
        assert '"python_function"' not in f.read()
    assert report["source"]["stacks"] is False
    assert "with_stack" in report["source"]["note"]
