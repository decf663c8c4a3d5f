"""The README quotes what the tool prints on the bundled example, and the measured figures it
compares them with are the ones on record (``fixtures/scenarios/measured.json``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_the_quoted_console_output_is_what_advisor_prints_on_the_example(tmp_path):
    quoted = README.split("```text\n", 1)[1].split("```", 1)[0].splitlines()
    run = subprocess.run(
        [sys.executable, "-m", "advisor.cli", "analyze", "advisor/examples/h100-host-sync.sqlite.gz",
         "--html", str(tmp_path / "report.html")],
        cwd=ROOT, env={**os.environ, "COLUMNS": "80", "TERM": "dumb"}, capture_output=True,
        text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    printed = [line.rstrip() for line in run.stdout.splitlines()]
    assert len(quoted) >= 6
    missing = [line for line in quoted if line.rstrip() not in printed]
    assert not missing, "\n".join(printed)


def test_the_measured_figures_are_the_recorded_ones():
    host_sync = json.loads((ROOT / "fixtures" / "scenarios" / "measured.json").read_text())
    m = host_sync["rules"]["host-sync"]
    for figure in (f"{m['bad']['mean_ms']:.2f} ms", f"{m['good']['mean_ms']:.2f} ms",
                   f"{m['speedup_mean']:.2f}x measured"):
        assert figure in " ".join(README.split()), figure
