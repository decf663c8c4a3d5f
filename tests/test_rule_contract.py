"""Every registered rule keeps the rule contract (metadata, docs, plugin registration)."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.engine.docs import rule_markdown
from advisor.engine.registry import load_rules
from advisor.engine.rule import CODE_RE, DOC_SECTIONS, NAME_RE, Category, Requirement, Rule

RULES = load_rules()
DOCS = Path(__file__).resolve().parents[1] / "docs" / "rules"
ISSUE_RULES = {
    "cpu-bound-loss", "loader-jitter", "rng-bound-dropout", "unfused-attention", "unfused-gemm-gelu",
    "uncaptured-cuda-graph", "pageable-memcpy", "host-sync", "fp32-matmul", "fp8-candidate",
}


def test_every_rule_the_product_promises_is_registered():
    assert {r.name for r in RULES} >= ISSUE_RULES


def test_codes_and_names_are_unique():
    assert len({r.code for r in RULES}) == len(RULES)
    assert len({r.name for r in RULES}) == len(RULES)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_rule_metadata_is_well_formed(rule: type[Rule]):
    assert CODE_RE.match(rule.code)
    assert NAME_RE.match(rule.name)
    assert isinstance(rule.category, Category)
    assert all(isinstance(r, Requirement) for r in rule.requires)
    assert rule.summary().endswith(".")


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_docstring_has_every_section_in_order(rule: type[Rule]):
    sections = list(rule.doc_sections())
    assert sections == list(DOC_SECTIONS), f"{rule.name}: sections {sections}"
    for title, body in rule.doc_sections().items():
        assert body.strip(), f"{rule.name}: section {title!r} is empty"
    assert "```" in rule.doc_sections()["Example"]
    assert "```" in rule.doc_sections()["Use instead"]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_generated_docs_are_current(rule: type[Rule]):
    page = DOCS / f"{rule.name}.md"
    assert page.exists(), f"run: advisor rules --write-docs docs/rules ({page} missing)"
    assert page.read_text(encoding="utf-8") == rule_markdown(rule), (
        f"{page} is stale: run advisor rules --write-docs docs/rules")


def test_a_malformed_rule_is_refused_at_definition():
    with pytest.raises(TypeError, match="code"):

        class BadCode(Rule):
            """Bad."""

            code = "bad"
            name = "bad-code"
            category = Category.HOST

            def check(self, graph, ctx):
                return []
