"""No false findings on healthy steps: every rule on every fixed capture and healthy real trace.

The set and the true findings it is allowed to carry (each with its reason) are in
benchmarks/rule_matrix.py, which prints the whole matrix.
"""

from __future__ import annotations

import sys

import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import rule_matrix

TRACES = rule_matrix.healthy_traces()


def test_the_set_covers_every_scenario_fix_and_a_real_trace():
    labels = [rule_matrix.label(p) for p in TRACES]
    scenarios = sorted(p.name for p in (ROOT / "fixtures" / "scenarios").iterdir() if p.is_dir())
    for s in scenarios:
        assert any(lbl.startswith(f"scenarios/{s}/good") for lbl in labels), s
    assert any(lbl.startswith("nsys-ai/") for lbl in labels)


@pytest.mark.parametrize("path", TRACES, ids=[rule_matrix.label(p) for p in TRACES])
def test_no_rule_raises_a_false_finding_on_a_healthy_step(path):
    from advisor.analysis import analyze

    label = rule_matrix.label(path)
    false = [f"{f.rule} {f.estimate.speedup:.2f}x: {f.message}"
             for f in analyze(path).results.findings
             if rule_matrix.known_true(label, f.rule) is None]
    assert not false, (label, false)
