"""Every rule over every real trace in ../shared/traces, against a reviewed snapshot.

Like ruff's ecosystem check: a change to a rule or to the replay shows here as a changed finding on
real workloads (a new false positive, a vanished finding, an estimate that moved). The snapshot
was read trace by trace (docs/validation.md, "Corpus run"); regenerate it after reviewing the
differences with ``ADVISOR_UPDATE_GOLDEN=1 python -m pytest tests/corpus``.
"""

from __future__ import annotations

import json
import os

import pytest

from advisor.analysis import analyze
from advisor.report.json_report import to_dict
from tests.conftest import SHARED_TRACES

GOLDEN = os.path.join(os.path.dirname(__file__), "expected.json")
TRACES = sorted(
    str(p.relative_to(SHARED_TRACES)) for p in SHARED_TRACES.rglob("*")
    if p.name.endswith((".sqlite", ".json.gz"))
) if SHARED_TRACES.exists() else []
SPEEDUP_TOLERANCE = 0.02


def summary(rel: str) -> dict:
    d = to_dict(analyze(SHARED_TRACES / rel))
    det = d["steps"]["detection"]
    return {
        "steps": d["steps"]["count"],
        # Which steps, how they were found, and whether they carry estimates.
        "detection": {"method": det["method"], "pid": det["pid"], "first": det["first"],
                      "last": det["last"], "confidence": det["confidence"],
                      "estimates": d["estimate_withheld"] is None},
        "findings": {f["rule"]: round(f["estimated_speedup"], 3) for f in d["findings"]},
    }


@pytest.fixture(scope="module")
def golden() -> dict:
    if os.environ.get("ADVISOR_UPDATE_GOLDEN"):
        data = {rel: summary(rel) for rel in TRACES}
        with open(GOLDEN, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.write("\n")
    with open(GOLDEN, encoding="utf-8") as f:
        return json.load(f)


@pytest.mark.skipif(not TRACES, reason="../shared/traces is not beside the repository")
@pytest.mark.parametrize("rel", TRACES)
def test_findings_on_real_traces_match_the_reviewed_snapshot(rel, golden):
    assert rel in golden, f"{rel}: new trace, review it and regenerate the snapshot"
    got, want = summary(rel), golden[rel]
    assert got["steps"] == want["steps"]
    assert got["detection"] == want["detection"], (rel, got["detection"])
    assert sorted(got["findings"]) == sorted(want["findings"]), (rel, got, want)
    for rule, speedup in want["findings"].items():
        assert abs(got["findings"][rule] - speedup) <= SPEEDUP_TOLERANCE, (rel, rule, got, want)
