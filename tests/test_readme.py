"""The README quotes what the tool prints on the bundled example, and the measured figures it
compares them with are the ones on record (``fixtures/scenarios/measured.json``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_the_quoted_console_output_is_what_advisor_prints_on_the_example(tmp_path):
    quoted = README.split("```text\n", 1)[1].split("```", 1)[0].splitlines()
    run = subprocess.run(
        [sys.executable, "-m", "advisor.cli", "analyze", "advisor/examples/h100-host-sync.sqlite.gz",
         "--html", str(tmp_path / "report.html")],
        cwd=ROOT, env={**os.environ, "COLUMNS": "80", "TERM": "dumb"}, capture_output=True,
        text=True, timeout=HANG_GUARD_S)
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


# ----- "How far to trust the numbers": each figure recomputed with the command the README names --

def _said() -> str:
    return " ".join(README.split())


def _public_ratios(rule: str, cases: tuple[str, ...]) -> tuple[list[float], list[float]]:
    """(estimate / measured for each capture, measured speedups) of the public rows
    `python benchmarks/validate_public.py` prints."""
    from advisor.analysis import analyze
    from tests import validation_data as vd

    ratios, measured = [], []
    for case, _fix, r, before, after in vd.PUBLIC_ROWS:
        if r != rule or case not in cases:
            continue
        m = vd.public_speedup(case, before, after)
        measured.append(m)
        for name in ("nsys.sqlite.gz", "trace.json.gz"):
            f = next(x for x in analyze(vd.PUBLIC / case / name).results.findings if x.rule == rule)
            ratios.append(f.estimate.speedup / m)
    return ratios, measured


def test_the_public_script_ratios_are_what_validate_public_prints():
    ratios, measured = _public_ratios("fp32-matmul", ("lightning-vit-b", "hf-gpt2"))
    autocast = (f"autocast on the FP32 Lightning ViT and HF GPT-2 is estimated at "
                f"{min(ratios):.2f}-{max(ratios):.2f}x of it "
                f"({measured[0]:.2f}x and {measured[1]:.2f}x measured")
    assert autocast in _said(), autocast
    ratios, _ = _public_ratios("compiler-fusion", ("nanogpt", "timm-vit-b"))
    compile_ = f"compile estimates on nanoGPT and timm are {min(ratios):.2f}-{max(ratios):.2f}x"
    assert compile_ in _said(), compile_


def test_the_step_time_claim_is_what_step_time_check_prints():
    from tests import validation_data as vd

    errs = vd.step_time_errors("nsys")
    within = sum(abs(e) <= vd.STEP_TIME_BAND for e in errs.values())
    claim = f"within {vd.STEP_TIME_BAND:.0%} on {within} of {len(errs)} nsys captures"
    assert claim in _said(), claim


def test_the_count_of_unmeasured_findings_on_healthy_traces_is_the_listed_one():
    from tests.healthy_findings import MEASURED, MISSED, UNMEASURED

    said = " ".join(_said().split())
    total = len(UNMEASURED) + len(MEASURED)
    true = [t for t in MEASURED.values() if not t.false]
    within = [t for t in true if not t.miss]
    assert f"of the {total} findings of other rules on healthy traces" in said
    assert f"{len(MEASURED)} now have their fix timed" in said
    assert f"{len(true)} are true findings ({len(within)} within their gain bound" in said
    assert f"{len(true) - len(within)} outside it" in said
    assert f"{len(MEASURED) - len(true)} are false findings the rule must not raise" in said
    assert f"{len(MISSED)} more true findings are missed" in said
    assert f"the other {len(UNMEASURED)} have no measurement behind them" in said


def test_the_validation_counts_are_the_rule_cases_lists():
    """README's "N of M" on the fit and check sets are what tests/test_rule_cases.py checks: its
    cases less its strict-xfail lists of misses (a miss fixed or added moves both)."""
    from tests import test_rule_cases as rc

    fit, check = len(rc.CAPTURED), len(rc.CHECK_GAIN_CASES)
    fit_claim = (f"{fit - len(rc.OUT_OF_TOLERANCE)} of {fit} estimates (12 rules, nsys and "
                 "torch.profiler) fall within a factor 1.3")
    gain_claim = f"{fit - len(rc.GAIN_MISSES)} of {fit} predict the share of the step saved"
    check_claim = (f"{check - len(rc.CHECK_OUT_OF_TOLERANCE)} of {check} and "
                   f"{check - len(rc.CHECK_GAIN_MISSES)} of {check} (unfused-gemm-gelu")
    text = _said()
    for claim in (fit_claim, gain_claim, check_claim):
        assert claim in text, claim
    assert "three process runs" in text and {"unfused-gemm-gelu"} == rc.UNRESOLVED
