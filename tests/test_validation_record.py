"""Each rule's declared out-of-sample check (`Validation`, issue 35) against the check set's
captures: the label a rule's docs and findings carry comes from data the repository holds.

A rule declares a record exactly when ``fixtures/scenarios-check/<rule>/`` has its bad and fixed
variants timed; the record's measured speedup is the one the check set gives
(`tests.validation_data.measured_speedup`, the median over process runs once ``repeats.json``
has them), its run count the runs behind it, and its shape the check capture's (the entries of
its ``scenario_info``, or the check branch of the scenario's source where the capture does not
record one), different from the fit capture's. A record without a capture, a capture without a
record, or a record whose figure went stale fails here; job rules have no check captures yet
and must be unvalidated.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.engine.docs import rule_markdown
from advisor.engine.registry import load_rules
from advisor.engine.rule import UNVALIDATED, Validation, validation_text
from advisor.job.rule import load_job_rules
from tests import validation_data as vd

RULES = load_rules()
JOB_RULES = load_job_rules()
CHECK = vd.SETS["check"]
SCENARIO_SRC = vd.ROOT / "benchmarks" / "scenarios"


def checked(rule: str) -> bool:
    """The check set has the rule's scenario with both variants timed."""
    return all((CHECK / rule / v / "timing.json").exists() for v in ("bad", "good"))


def check_branch(rule: str) -> str:
    """The lines of the scenario's source that select its check shape (``SCENARIO_SHAPE``)."""
    lines = (SCENARIO_SRC / rule / "scenario.py").read_text().splitlines()
    return "\n".join(" ".join(lines[i:i + 2]) for i, x in enumerate(lines)
                     if "SCENARIO_SHAPE" in x)


def info(set_name: str, rule: str) -> dict:
    return json.loads((vd.SETS[set_name] / rule / "bad" / "timing.json").read_text()).get(
        "scenario_info", {})


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_a_rule_is_validated_exactly_when_the_check_set_has_its_timed_capture(rule):
    assert (rule.validation is not None) == checked(rule.name), (
        f"{rule.name}: declares {rule.validation} but the check set "
        f"{'has' if checked(rule.name) else 'lacks'} its timed capture")


@pytest.mark.parametrize("rule", [r for r in RULES if r.validation is not None], ids=lambda r: r.name)
def test_the_record_matches_the_check_capture(rule):
    v: Validation = rule.validation  # type: ignore[assignment]
    rule_dir = CHECK / rule.name
    assert v.measured == pytest.approx(vd.measured_speedup(rule_dir), abs=0.005), (
        f"{rule.name}: the record says {v.measured}x, the check set {vd.measured_speedup(rule_dir):.3f}x")
    assert v.runs == vd.measured_runs(rule_dir)
    check, fit, src = info("check", rule.name), info("fit", rule.name), check_branch(rule.name)
    for key, value in v.shape.items():
        if key in check:
            assert check[key] == value, f"{rule.name}: {key} {value} vs the capture's {check[key]}"
        else:  # the capture does not record it: the check branch of the scenario sets it
            assert str(value) in src, f"{rule.name}: {key} {value} not in the check shape's source"
    assert src, f"{rule.name}: its scenario has no check shape"
    assert any(fit.get(k) != x for k, x in v.shape.items() if k in fit) or not fit.keys() & v.shape.keys(), (
        f"{rule.name}: the declared shape is the fit capture's")


@pytest.mark.parametrize("rule", JOB_RULES, ids=lambda r: r.name)
def test_job_rules_have_no_out_of_sample_capture_and_are_labelled_unvalidated(rule):
    assert not (CHECK / rule.name).exists()
    assert rule.validation is None
    assert "**Unvalidated:" in rule_markdown(rule)


@pytest.mark.parametrize("rule", [*RULES, *JOB_RULES], ids=lambda r: r.name)
def test_the_rule_page_carries_the_label(rule):
    page = rule_markdown(rule)
    label = validation_text(rule.validation)
    assert f"**{label[0].upper()}{label[1:]}.**" in page
    if rule.validation is not None:
        assert f"{rule.validation.measured:.2f}x" in page


@pytest.mark.parametrize("rule", JOB_RULES, ids=lambda r: r.name)
def test_job_rule_pages_are_current(rule):
    page = vd.ROOT / "docs" / "rules" / f"{rule.name}.md"
    assert page.exists() and page.read_text(encoding="utf-8") == rule_markdown(rule), (
        f"{page} is stale: run advisor rules --write-docs docs/rules")


def test_a_malformed_record_is_refused_at_definition():
    from advisor.engine.rule import Category, Rule

    with pytest.raises(TypeError, match="validation"):
        type("Recorded", (Rule,), {
            "__doc__": "Doc.", "code": "TEST902", "name": "recorded", "category": Category.HOST,
            "validation": Validation({}, measured=1.2), "check": lambda self, graph, ctx: (),
        })


def test_repeated_runs_replace_the_single_timing(tmp_path: Path):
    """With 3 runs per variant in ``repeats.json`` the measured speedup is the median bad over the
    median good, the record's run count 3; with fewer the capture's single run stands."""
    rule = "rng-bound-dropout"
    shutil_copy(CHECK / rule, tmp_path / rule)
    one = vd.measured_speedup(tmp_path / rule)
    (tmp_path / vd.REPEATS_FILE).write_text(json.dumps(
        {"rules": {rule: {"bad": [14.0, 14.4, 14.2], "good": [12.5, 13.0, 12.6]}}}))
    assert vd.measured_runs(tmp_path / rule) == 3
    assert vd.measured_speedup(tmp_path / rule) == pytest.approx(14.2 / 12.6)
    assert vd.measured_spread(tmp_path / rule) == pytest.approx((14.0 / 13.0, 14.4 / 12.5))
    (tmp_path / vd.REPEATS_FILE).write_text(json.dumps({"rules": {rule: {"bad": [14.0], "good": [12.5]}}}))
    assert vd.measured_runs(tmp_path / rule) == 1 and vd.measured_speedup(tmp_path / rule) == one


def shutil_copy(src: Path, dst: Path) -> None:
    """The scenario's timings only (the captures are not read here)."""
    for t in src.glob("*/timing.json"):
        (dst / t.parent.name).mkdir(parents=True, exist_ok=True)
        (dst / t.parent.name / "timing.json").write_bytes(t.read_bytes())


def test_unvalidated_is_what_a_rule_without_a_record_says():
    assert validation_text(None) == UNVALIDATED and UNVALIDATED.startswith("unvalidated")


@pytest.fixture(scope="module")
def dropout_analysis():
    """A real capture whose first finding's rule is validated (rng-bound-dropout's check set)."""
    from advisor.analysis import analyze

    return analyze(CHECK / "rng-bound-dropout" / "bad" / "trace.json.gz")


def test_findings_carry_the_label_in_json_console_and_html(dropout_analysis):
    """Validated: the record in the JSON; unvalidated (the same finding with the record taken
    away, as a rule without one gives it): the JSON says so, the console and HTML say it in words."""
    import dataclasses
    import io

    from rich.console import Console

    from advisor.report.finding_lines import finding_block
    from advisor.report.html_report import render_html
    from advisor.report.json_report import SCHEMA_PATH, to_dict

    data = to_dict(dropout_analysis)
    f = next(x for x in data["findings"] if x["rule"] == "rng-bound-dropout")
    assert f["validation"]["validated"] and f["validation"]["check"]["measured_speedup"] == 1.12
    finding = next(x for x in dropout_analysis.results.findings if x.rule == "rng-bound-dropout")
    bare = dataclasses.replace(finding, validation=None)

    def console_text(x) -> str:
        out = io.StringIO()
        finding_block(Console(file=out, width=200), 1, x, show_fixes=False)
        return out.getvalue()

    assert "unvalidated" not in console_text(finding)
    assert "unvalidated: this rule's estimate has no out-of-sample check" in console_text(bare)
    stripped = dataclasses.replace(dropout_analysis, results=dataclasses.replace(
        dropout_analysis.results, findings=[bare if x is finding else x
                                            for x in dropout_analysis.results.findings]))
    g = next(x for x in to_dict(stripped)["findings"] if x["rule"] == "rng-bound-dropout")
    assert g["validation"] == {"validated": False, "label": UNVALIDATED, "check": None}
    assert "Unvalidated: this rule's estimate has no out-of-sample check" in render_html(stripped)
    assert "Unvalidated:" not in render_html(dropout_analysis)
    import jsonschema

    jsonschema.validate(to_dict(stripped), json.loads(SCHEMA_PATH.read_text()))
