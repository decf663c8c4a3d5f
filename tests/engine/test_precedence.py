"""Causal precedence between findings, on real traces (`advisor.engine.precedence`).

`uncaptured-cuda-graph` removes the step's host waits as part of its fix (capture requires it),
so on a step where `host-sync` is found too, part of its gain is the syncs' time. HTA's
trace_diff control trace: all of it (the finding is dropped, kept as a match explained by
host-sync); HTA's df_index_resolver trace: a graph-capture gain remains after the syncs are gone,
shown conditional on host-sync with the estimate for that step.
"""

from __future__ import annotations

import pytest

from advisor.analysis import analyze_graph
from advisor.ingest.base import load_trace
from tests.conftest import shared

GRAPH = "uncaptured-cuda-graph"


def _by_rule(findings):
    return {f.rule: f for f in findings}


def test_time_the_syncs_explain_is_not_claimed_again():
    graph = load_trace(shared("hta/trace_diff/control/control.json.gz"))
    r = analyze_graph(graph).results
    assert "host-sync" in _by_rule(r.findings) and GRAPH not in _by_rule(r.findings)
    weak = _by_rule(r.below_threshold)[GRAPH]
    assert weak.conditional_on == "host-sync" and weak.explained
    alone = analyze_graph(graph, rule_names=[GRAPH]).results
    assert _by_rule(alone.findings)[GRAPH].estimate.speedup > 1.05  # what it claimed by itself


def test_a_remaining_gain_is_conditional_on_the_primary():
    graph = load_trace(shared("hta/df_index_resolver/df_index_resolver.json.gz"))
    r = analyze_graph(graph).results
    f = _by_rule(r.findings)[GRAPH]
    assert f.conditional_on == "host-sync"
    assert any("host-sync is fixed first" in a for a in f.estimate.assumptions)
    alone = _by_rule(analyze_graph(graph, rule_names=[GRAPH]).results.findings)[GRAPH]
    assert 1.02 <= f.estimate.speedup < alone.estimate.speedup
    # it keeps its estimate alone, the rule's own when it runs by itself (what --try measures)
    assert f.alone is not None
    assert f.alone.speedup == pytest.approx(alone.estimate.speedup, rel=1e-9)
    # findings are ranked by what each fix gives on its own, conditional or not (issue 33)
    ranks = [x.rank_speedup for x in r.findings]
    assert ranks == sorted(ranks, reverse=True)
    assert r.findings.index(f) == sum(1 for x in r.findings if x.rank_speedup > f.rank_speedup)
