"""No false findings on healthy steps: every rule on every fixed capture and healthy real trace.

There is no allowlist (issue 35): a finding on a healthy trace is either a measured true finding
or a false one. None is measured yet, so every finding raised there is listed in
tests/healthy_findings.py and runs here as a strict xfail: the count is visible in the summary,
an entry the rule stops raising fails until it is removed, and any finding not listed fails.
`python benchmarks/rule_matrix.py` prints the whole matrix.
"""

from __future__ import annotations

from functools import cache

import pytest

from advisor.analysis import Analysis, analyze
from tests import validation_data as vd
from tests.healthy_findings import UNMEASURED

TRACES = vd.healthy_traces()
BY_LABEL = {vd.label(p): p for p in TRACES}
LISTED = sorted(k for k in UNMEASURED if k[0] in BY_LABEL)


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
    missing = [k for k in UNMEASURED if k[0] not in BY_LABEL]
    assert not missing


@pytest.mark.grouped_by("label")
@pytest.mark.parametrize("label", list(BY_LABEL))
def test_no_unlisted_finding_on_a_healthy_step(label: str):
    new = [f"{f.rule} {f.estimate.speedup:.2f}x: {f.message}" for f in _analysis(label).results.findings
           if (label, f.rule) not in UNMEASURED]
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
    missing = [k for k in UNMEASURED if f"| `{k[0]}` | {k[1]} |" not in docs]
    assert not missing
