"""Every registered rule keeps the rule contract (metadata, docs, plugin registration)."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

import pytest

from advisor.engine.docs import frameworks_markdown, rule_markdown, with_readme_table
from advisor.engine.registry import load_rules
from advisor.engine.rule import CODE_RE, DOC_SECTIONS, NAME_RE, Category, FixVariant, Requirement, Rule

RULES = load_rules()
ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "rules"
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
def test_docs_have_every_section_in_order(rule: type[Rule]):
    sections = list(rule.documented_sections())
    assert sections == list(DOC_SECTIONS), f"{rule.name}: sections {sections}"
    for title, body in rule.documented_sections().items():
        assert body.strip(), f"{rule.name}: section {title!r} is empty"
    assert "```" in rule.documented_sections()["Example"]
    assert "```" in rule.documented_sections()["Use instead"]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_the_fix_is_written_once_as_declared_data(rule: type[Rule]):
    """"Use instead" is generated from the declared fixes, never a second copy in the docstring;
    every mechanism has a plain-PyTorch fix and the title of each variant differs by framework
    (a framework's variant that repeated plain PyTorch's would be no variant)."""
    assert "Use instead" not in rule.doc_sections()
    assert rule.fixes and all(isinstance(v, FixVariant) for v in rule.fixes)
    for mechanism in rule.mechanisms:
        variants = [v for v in rule.fixes if v.mechanism == mechanism]
        assert any(v.framework == "pytorch" for v in variants)
        assert len({v.title for v in variants}) == len(variants), (rule.name, mechanism)
        for v in variants:
            assert v.snippet.strip() and v.title[0].isupper()


def test_frameworks_table_and_readme_table_are_current():
    page = ROOT / "docs" / "frameworks.md"
    assert page.read_text(encoding="utf-8") == frameworks_markdown(RULES), (
        "docs/frameworks.md is stale: run advisor rules --write-docs docs/rules")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme == with_readme_table(readme, RULES), (
        "README.md's rules table is stale: run advisor rules --write-docs docs/rules")


@pytest.mark.parametrize(("framework", "error"), [
    ("lightning", "no plain-PyTorch fix"),  # every mechanism needs the plain-PyTorch fallback
    ("keras", "unknown framework"),
])
def test_declared_fixes_are_checked_at_definition(framework, error):
    with pytest.raises(TypeError, match=error):
        type("Declared", (Rule,), {
            "__doc__": "Doc.", "code": "TEST901", "name": "declared", "category": Category.HOST,
            "mechanisms": MappingProxyType({"a-cause": "what it is"}),
            "fixes": (FixVariant("a-cause", "Do it", "x = 1", framework=framework),),
            "check": lambda self, graph, ctx: (),
        })


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
