"""No false findings on healthy steps: every rule on every fixed capture and healthy real trace.

There is no allowlist (issue 35): a finding on a healthy trace is either a measured true finding
or a false one. The unmeasured ones are listed in tests/healthy_findings.py (``UNMEASURED``) and
run here as strict xfails: the count is visible in the summary, an entry the rule stops raising
fails until it is removed, and any finding not listed fails. The measured ones (``MEASURED``: the
fix applied to that step and timed without a profiler) must be raised, and their estimate's gain
is held to the rule's bound like any other (a strict xfail where it is known to be outside).
`python benchmarks/rule_matrix.py` prints the whole matrix.
"""

from __future__ import annotations

from functools import cache

import pytest

from advisor.analysis import Analysis, analyze
from tests import validation_data as vd
from tests.healthy_findings import MEASURED, UNMEASURED

TRACES = vd.healthy_traces()
BY_LABEL = {vd.label(p): p for p in TRACES}
LISTED = sorted(k for k in UNMEASURED if k[0] in BY_LABEL)
TIMED = sorted(MEASURED)


@cache
def _analysis(label: str) -> Analysis:
    return analyze(BY_LABEL[label])


def test_the_set_covers_every_scenario_fix_and_a_real_trace():
    labels = list(BY_LABEL)
    for s in sorted(p.name for p in vd.SCENARIOS.iterdir() if p.is_dir()):
        assert any(lbl.startswith(f"scenarios/{s}/good") for lbl in labels), s
    assert any(lbl.startswith("nsys-ai/") for lbl in labels)


def test_every_listed_finding_names_a_healthy_trace():
    """An entry for a trace that is not in the set would be an allowlist entry nobody checks."""
    missing = [k for k in [*UNMEASURED, *MEASURED] if k[0] not in BY_LABEL]
    assert not missing
    assert not set(UNMEASURED) & set(MEASURED)


@pytest.mark.grouped_by("label")
@pytest.mark.parametrize("label", list(BY_LABEL))
def test_no_unlisted_finding_on_a_healthy_step(label: str):
    new = [f"{f.rule} {f.estimate.speedup:.2f}x: {f.message}" for f in _analysis(label).results.findings
           if (label, f.rule) not in UNMEASURED and (label, f.rule) not in MEASURED]
    assert not new, (label, new)


@pytest.mark.grouped_by("label")
@pytest.mark.parametrize(("label", "rule"), LISTED, ids=[f"{t}-{r}" for t, r in LISTED])
def test_an_unmeasured_finding_is_not_raised_on_a_healthy_step(label: str, rule: str, request):
    request.applymarker(pytest.mark.xfail(reason=UNMEASURED[(label, rule)], strict=True))
    raised = [f for f in _analysis(label).results.findings if f.rule == rule]
    assert not raised, f"{label}: {rule} {raised[0].estimate.speedup:.2f}x, never measured"


def test_the_docs_table_lists_every_unmeasured_finding():
    """docs/validation.md's table (`benchmarks/rule_matrix.py --markdown`) names each entry."""
    docs = (vd.ROOT / "docs" / "validation.md").read_text()
    missing = [k for k in [*UNMEASURED, *MEASURED] if f"| `{k[0]}` | {k[1]} |" not in docs]
    assert not missing


@pytest.mark.parametrize(("label", "rule"), TIMED, ids=[f"{t}-{r}" for t, r in TIMED])
def test_a_measured_finding_rests_on_enough_runs_of_one_machine(label: str, rule: str):
    """Each variant in at least MIN_RUNS processes, the fix's runs carrying the fix, all on the
    GPU the entry names (a ratio never mixes two machines)."""
    t = MEASURED[(label, rule)]
    base, fixed = t.runs("base"), t.runs(t.fix)
    assert len(base) >= vd.MIN_RUNS and len(fixed) >= vd.MIN_RUNS, (len(base), len(fixed))
    assert all(r.get("fix") is None for r in base) and all(r["fix"] == t.fix for r in fixed)
    assert {r["variant"] for r in base + fixed} == {"good"}
    gpus = {r["env"]["gpu"] for r in base + fixed}
    assert len(gpus) == 1 and t.machine in gpus.pop()


@pytest.mark.grouped_by("label")
@pytest.mark.parametrize(("label", "rule"), TIMED, ids=[f"{t}-{r}" for t, r in TIMED])
def test_a_measured_finding_is_raised_and_its_gain_is_within_the_bound(label: str, rule: str,
                                                                      request):
    t = MEASURED[(label, rule)]
    if t.over:
        request.applymarker(pytest.mark.xfail(reason=t.over, strict=True))
    raised = [f for f in _analysis(label).results.findings if f.rule == rule]
    assert raised, f"{label}: {rule} no longer raised, while its fix measured {t.speedup():.3f}x"
    est, meas = raised[0].estimate.speedup, t.speedup()
    err = (vd.saving(est) - vd.saving(meas)) / vd.saving(meas)
    assert abs(err) <= vd.gain_bound(rule), f"{label}: {est:.3f}x against {meas:.3f}x ({err:+.0%})"
