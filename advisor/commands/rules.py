"""`advisor rules`: list every installed rule with its documentation."""

from __future__ import annotations

import click


@click.command("rules")
@click.argument("name", required=False)
def command(name: str | None) -> int:
    """List the rules, or print one rule's full documentation."""
    from rich.console import Console
    from rich.markdown import Markdown
    from rich.table import Table

    from advisor.engine.registry import load_rules, select

    console = Console(highlight=False)
    rules = load_rules()
    if name:
        (rule,) = select(rules, [name])
        console.print(f"[bold]{rule.code} {rule.name}[/] ({rule.category.value}, {rule.status.value})")
        console.print(rule.summary())
        for title, body in rule.doc_sections().items():
            console.print(Markdown(f"### {title}\n\n{body}"))
        return 0
    t = Table()
    for col in ("code", "name", "category", "status", "summary"):
        t.add_column(col)
    for r in rules:
        t.add_row(r.code, r.name, r.category.value, r.status.value, r.summary())
    console.print(t)
    return 0
