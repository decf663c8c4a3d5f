"""`benchmarks/public/parse_loader_logs.py --slow`: the table of `wave5_loader_slow.sh` (issue
34), read from real logs of pytorch/examples' ImageNet script on the H100 host (4 and 15
workers restarted at every epoch and evaluation) and `advisor profile`'s state of the -j 4 run
(fixtures/archive/public/loader-imagenet/bursty-j4-2026-11-25), laid out as the device script
leaves its work folder."""

from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.public.loader_slow_table import run_times, table
from tests.archive import archived
from tests.conftest import ROOT

H100 = archived("public/loader-imagenet/bursty-j4-2026-11-25")
PARSER = ROOT / "benchmarks" / "public" / "parse_loader_logs.py"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("w5l")
    (d / "logs").mkdir()
    (d / "rep").mkdir()
    for n in (4, 15):
        (d / "logs" / f"j{n}.log").write_bytes(gzip.decompress(
            (H100 / f"plain_j{n}.log.gz").read_bytes()))
    shutil.copy(H100 / "steps_rank0.json", d / "rep" / "steps_rank0.json")
    return d


def test_more_workers_cost_more_at_every_epoch_and_evaluation_start(workdir):
    """The run-level figures from the logs: 15 workers settle the step near the 4 workers'
    (64 against 58 ms: cores shared), but each epoch start and each evaluation's loader start
    costs more (1706 against 755 ms, 455 against 168 ms)."""
    j4 = run_times((workdir / "logs" / "j4.log").read_text())
    j15 = run_times((workdir / "logs" / "j15.log").read_text())
    assert j4 is not None and j15 is not None
    assert j15["epoch_start_ms"] > j4["epoch_start_ms"] > 0
    assert j15["eval_ms"] > j4["eval_ms"] > 0
    assert j15["settled_ms"] >= j4["settled_ms"]
    # the run's time per step holds the epoch starts and evaluations the settled step leaves out
    for r in (j4, j15):
        assert r["run_ms"] > r["settled_ms"]


def test_the_table_puts_the_model_beside_the_logs(workdir):
    text = table(workdir)
    rows = {line.split("|")[1].strip(): line for line in text.splitlines()
            if line.startswith("| ") and line.split("|")[1].strip().isdigit()}
    assert set(rows) == {"4", "15"}
    assert "| 1.00x |" in rows["4"]
    assert "persistent_workers (loader-restarts, run-relative)" in text
    assert "-j 4 profile: 4 workers on 16 cores" in text


def test_the_parser_prints_the_table_and_refuses_bad_arguments(workdir):
    done = subprocess.run([sys.executable, str(PARSER), "--slow", str(workdir)],
                          capture_output=True, text=True, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("| -j |")
    bad = subprocess.run([sys.executable, str(PARSER)], capture_output=True, text=True,
                         cwd=ROOT, check=False)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
