"""Rule documentation generated from the rules' docstrings (ruff's generate_docs idea).

`docs/rules/<name>.md` is written by ``advisor rules --write-docs docs/rules``; a test fails
when a file there differs from what the rule's docstring says now, so docs cannot go stale.
"""

from __future__ import annotations

from advisor.engine.rule import Rule


def rule_markdown(rule: type[Rule]) -> str:
    lines = [
        f"# {rule.name} ({rule.code})",
        "",
        f"_{rule.summary()}_",
        "",
        f"Category: {rule.category.value}. Status: {rule.status.value} since {rule.since}. "
        f"Needs: {', '.join(r.value for r in rule.requires) or 'nothing'}.",
        "",
    ]
    for title, body in rule.doc_sections().items():
        lines += [f"## {title}", "", body, ""]
    if rule.options:
        lines += ["## Options", "", f"Set in pyproject.toml (`[tool.advisor.options.{rule.name}]`) or "
                  f"with `--rule-option {rule.name}.KEY=VALUE`.", "",
                  "| option | default | meaning |", "|---|---|---|"]
        lines += [f"| `{key}` | `{opt.default!r}` | {opt.doc} |" for key, opt in rule.options.items()]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
