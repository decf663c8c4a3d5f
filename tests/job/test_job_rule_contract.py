"""Job rules keep the one rule contract (`advisor.engine.rule.RuleSpec`) at job scope."""

from __future__ import annotations

from typing import ClassVar

import pytest

from advisor.engine.rule import (
    Finding,
    FixVariant,
    JobRequirement,
    Requirement,
    Rule,
    RuleSpec,
    Scope,
)
from advisor.job.rule import JobRule, load_job_rules

DOC = """Something.

    What it detects
    ---------------
    x

    Why it is slow
    --------------
    x

    Evidence
    --------
    x

    Example
    -------
    x

    Use instead
    -----------
    x

    Speedup model
    -------------
    x

    Known false positives
    ---------------------
    x

    References
    ----------
    x
    """


@pytest.mark.parametrize("rule", load_job_rules(), ids=lambda r: r.name)
def test_job_rules_declare_like_rank_rules(rule):
    assert issubclass(rule, RuleSpec) and not issubclass(rule, Rule)
    assert rule.scope is Scope.JOB
    assert rule.mechanisms and rule.fixes  # every mechanism has its plain-PyTorch fix (checked)
    assert all(isinstance(r, JobRequirement) for r in rule.requires)
    models = rule.model if isinstance(rule.model, str) else set(rule.model)
    assert isinstance(models, str) or models == set(rule.mechanisms)
    assert rule.summary() and "Speedup model" in rule.doc_sections()


def test_a_job_rule_with_a_rank_requirement_is_refused():
    with pytest.raises(TypeError, match="JobRequirement"):
        type("Bad", (JobRule,), {"__doc__": DOC, "code": "DIST900", "name": "bad",
                                 "requires": (Requirement.PHASES,),
                                 "check": lambda self, job: iter(())})


def test_a_job_rule_fix_for_an_undeclared_mechanism_is_refused():
    with pytest.raises(TypeError, match="mechanism"):
        type("Bad", (JobRule,), {"__doc__": DOC, "code": "DIST901", "name": "bad",
                                 "fixes": (FixVariant("nowhere", "t", "s"),),
                                 "check": lambda self, job: iter(())})


def test_a_rule_with_an_unknown_gate_signal_is_refused():
    class Base(Rule):
        code: ClassVar[str] = "HOST900"

    with pytest.raises(TypeError, match="gate signals"):
        type("Bad", (Base,), {"__doc__": DOC, "name": "bad", "category": "host",
                              "gate_signals": ("kernels-per-second",),
                              "check": lambda self, graph, ctx: iter(())})


def test_job_findings_are_findings_with_ranks(synth_summaries):
    from advisor.engine.job_model import build_job
    from advisor.job.rule import run_job_rule_set

    results = run_job_rule_set(build_job(synth_summaries))
    assert results.findings and all(isinstance(f, Finding) and f.ranks for f in results.findings)
    for f in results.findings:  # the fix is the declared one for the mechanism it names
        rule = next(r for r in load_job_rules() if r.name == f.rule)
        assert f.fix.title.startswith(rule.fix_for(f.fix.mechanism, "pytorch").title.split("$")[0])
