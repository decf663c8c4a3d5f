"""The issue-35 validation scripts work on this tree: run as their users run them (a subprocess,
never imported: tests/test_no_benchmark_imports.py).

* benchmarks/mutation_check.py: every mutation's edit still applies to the source (a renamed
  constant would otherwise make a mutation check nothing; the script refuses a stale edit too).
* benchmarks/public/repeats_table.py: on real timing.json files laid out as
  benchmarks/public/wave5_repeats.sh writes them, the median-of-runs speedup, and the
  ``repeats.json`` it writes is what tests/validation_data.py reads.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import validation_data as vd
from tests.conftest import ROOT


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_every_mutation_edit_applies_to_this_tree():
    p = _run("benchmarks/mutation_check.py", "--check-edits")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "every edit applies" in p.stdout


def test_an_unknown_mutation_is_one_line_and_exit_2():
    p = _run("benchmarks/mutation_check.py", "no such mutation")
    assert p.returncode == 2 and "Traceback" not in p.stderr and "unknown mutation" in p.stderr


def test_repeats_table_takes_the_median_of_the_runs(tmp_path: Path):
    """Three runs made of the check set's real timings (the bad capture's run, and the same run
    with 2% and 4% added: what a slower process gives); the fixed variant's single run three times."""
    src = vd.SETS["check"] / "host-sync"
    for k, slower in enumerate((1.00, 1.02, 1.04), start=1):
        for v in ("bad", "good"):
            t = json.loads((src / v / "timing.json").read_text())
            if v == "bad":
                t["per_step_ms"] = [x * slower for x in t["per_step_ms"]]
            d = tmp_path / "runs" / f"run{k}" / "host-sync" / v
            d.mkdir(parents=True)
            (d / "timing.json").write_text(json.dumps(t))
    out = tmp_path / "repeats.json"
    p = _run("benchmarks/public/repeats_table.py", str(tmp_path / "runs"), "--write", str(out))
    assert p.returncode == 0, p.stderr
    bad = vd.mean_ms(json.loads((src / "bad" / "timing.json").read_text()))
    good = vd.mean_ms(json.loads((src / "good" / "timing.json").read_text()))
    assert f"{bad * 1.02 / good:7.3f}x" in p.stdout  # the median run
    runs = json.loads(out.read_text())["rules"]["host-sync"]
    assert runs["bad"] == pytest.approx([bad, bad * 1.02, bad * 1.04], rel=1e-4)
    shutil.copytree(src, tmp_path / "host-sync", ignore=shutil.ignore_patterns("*.gz"))
    assert vd.measured_runs(tmp_path / "host-sync") == 3
    assert vd.measured_speedup(tmp_path / "host-sync") == pytest.approx(bad * 1.02 / good, rel=1e-4)


def test_repeats_table_refuses_a_folder_without_runs(tmp_path: Path):
    p = _run("benchmarks/public/repeats_table.py", str(tmp_path))
    assert p.returncode == 2 and "Traceback" not in p.stderr and "no run" in p.stderr
