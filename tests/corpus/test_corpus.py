"""Every rule over every real trace in ../shared/traces, against a reviewed snapshot.

Like ruff's ecosystem check: a change to a rule or to the replay shows here as a changed finding on
real workloads (a new false positive, a vanished finding, an estimate that moved). The snapshot
was read trace by trace (docs/validation.md, "Corpus run"). It changes only through a reviewed
file: ``python benchmarks/corpus_snapshot.py`` writes a candidate beside it and prints the
differences; a person replaces the snapshot after reading them. This test only reads it.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

from tests.corpus.corpus_data import REVIEWED, summary, traces

TRACES = traces()
SPEEDUP_TOLERANCE = 0.02


@pytest.fixture(scope="module")
def golden() -> dict:
    with open(REVIEWED, encoding="utf-8") as f:
        return json.load(f)


def test_the_snapshot_is_never_written_by_a_test_run():
    """No environment switch or code path in the test regenerates the reviewed snapshot."""
    import inspect

    assert "open(REVIEWED, \"w\"" not in inspect.getsource(sys.modules[__name__])
    assert not any(k.startswith("ADVISOR_UPDATE") for k in os.environ)


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
