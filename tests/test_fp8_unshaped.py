"""fp8-candidate on traces that record no GEMM shapes (issue #35, wave 11).

Without shapes a GEMM's operands, whose casts decide whether FP8 pays, are priced as the fewest
its FLOPs allow (a cube): an upper bound. That bound promised 1.02-1.06x over compile alone on
five rank traces of the 2-GPU DDP job, where torchao float8 + compile measured 0.94x (batch 16)
and 0.96x (batch 32, 4 micro-batches) of compile alone on the job's own model and step
(``benchmarks/scenarios/ddp-job/fp8_per_rank.sh``, one H200,
``fixtures/archive/public/wave11-2026-12-03/fp8-per-rank``). Now an estimate that does not
survive the casts priced for the thinnest layers measured is withheld: the finding stays, with
its band and the reason, and the fixes together leave it out.
"""

from __future__ import annotations

import json
import re
import statistics
from functools import cache

import pytest

from advisor.analysis import Analysis, analyze
from tests.conftest import ROOT

RUNS = ROOT / "fixtures" / "archive" / "public" / "wave11-2026-12-03" / "fp8-per-rank"
JOBS = ROOT / "fixtures" / "jobs"
_LINE = re.compile(r"^(eager|compile|fp8-compile) b(\d+) a(\d+): ([\d.]+) ms")


def runs(batch: int, accum: int, fix: str) -> list[float]:
    """Median step (ms, CUDA events, no profiler) of each process run: the runs' JSON where the
    call returned it, else the line the run printed (logs/out.txt holds every run's)."""
    out = []
    for line in (RUNS / "logs" / "out.txt").read_text().splitlines():
        m = _LINE.match(line)
        if m and (m[1], int(m[2]), int(m[3])) == (fix, batch, accum):
            out.append(float(m[4]))
    kept = sorted(RUNS.glob(f"b{batch}-a{accum}-{fix}-*.json"))
    printed = [round(json.loads(p.read_text())["step_ms_cuda_events"]["median"], 2) for p in kept]
    assert all(p in out for p in printed), "a kept run's JSON disagrees with what it printed"
    return out


@pytest.mark.parametrize(("batch", "accum"), [(16, 1), (32, 4)])
def test_fp8_measured_slower_than_compile_alone_on_the_job_step(batch, accum):
    compiled, fp8 = runs(batch, accum, "compile"), runs(batch, accum, "fp8-compile")
    assert len(compiled) >= 2 and len(fp8) >= 2
    assert max(compiled) < min(fp8), "FP8 + compile slower than compile in every pair of runs"
    assert statistics.median(compiled) / statistics.median(fp8) < 0.97


@cache
def job_rank(path: str) -> Analysis:
    return analyze(JOBS / path, ("fp8-candidate", "compiler-fusion"))


@pytest.mark.parametrize("path", [
    "h200x2-ddp/torch/accum-nosync/rank0.json.gz",  # batch 16, 4 micro-batches
    "h200x2-ddp-b32/torch/accum-nosync/rank1.json.gz",  # batch 32, 4 micro-batches
    "h200x2-ddp-b32/torch/slow-rank-fixed/rank0.json.gz",  # batch 32, one micro-batch
])
def test_unshaped_fp8_on_the_job_is_withheld_and_left_out_of_the_total(path):
    a = job_rank(path)
    fp8 = next(f for f in a.results.findings if f.rule == "fp8-candidate")
    fusion = next(f for f in a.results.findings if f.rule == "compiler-fusion")
    e = fp8.estimate
    assert e.withheld and "no shapes" in e.withheld and "record_shapes" in e.withheld
    assert e.low <= 0.96 * fusion.estimate.speedup, "the band reaches the loss FP8 measured"
    assert "up to" in fp8.message
    # the total is compile's alone: the unpriced finding promises nothing
    assert a.results.combined.speedup == pytest.approx(fusion.estimate.speedup, rel=1e-9)
    assert a.results.findings[-1].rule == "fp8-candidate", "an unpriced finding is listed last"


def test_recorded_shapes_keep_the_estimate():
    """The same rule on a capture with shapes prices FP8 (measured 1.31x on this step)."""
    a = analyze(ROOT / "fixtures" / "scenarios" / "fp8-candidate" / "bad" / "trace.json.gz",
                ("fp8-candidate",))
    f = next(f for f in a.results.findings if f.rule == "fp8-candidate")
    assert f.estimate.withheld is None and 1.15 < f.estimate.speedup < 1.45


def test_a_report_whose_only_finding_is_unpriced_says_so():
    """The console lists it with its reason and no total; the HTML headline does not claim
    that nothing was found."""
    import io
    import re

    from rich.console import Console

    from advisor.report.console import render
    from advisor.report.html_report import render_html

    a = analyze(ROOT / "fixtures" / "scenarios" / "fp8-candidate" / "bad" / "nsys.sqlite.gz",
                ("fp8-candidate",))
    assert [f.rule for f in a.results.findings] == ["fp8-candidate"] and a.results.combined is None
    html = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", render_html(a)))
    assert "the findings below withhold their estimates" in html
    assert "no finding above 2% of the step" not in html
    console = Console(width=100, record=True, file=io.StringIO())
    render(a, console)
    text = " ".join(console.export_text().split())
    assert "no estimate: the trace records no shapes" in text
    assert "All step fixes together" not in text
