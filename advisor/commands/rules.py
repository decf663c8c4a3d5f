"""`advisor rules`: list every installed rule with its documentation."""

from __future__ import annotations

import click


@click.command("rules")
@click.argument("name", required=False)
@click.option("--write-docs", type=click.Path(file_okay=False),
              help="Write docs/rules/<name>.md files here, frameworks.md beside the folder, and "
                   "the rules table of the README.md two levels up (when it has one).")
def command(name: str | None, write_docs: str | None) -> int:
    """List the rules, or print one rule's full documentation."""
    from rich.console import Console
    from rich.markdown import Markdown
    from rich.padding import Padding
    from rich.table import Table

    from advisor.engine.registry import load_rules, select

    console = Console(highlight=False)
    rules = load_rules()
    if write_docs:
        from pathlib import Path

        from advisor.engine.docs import README_BEGIN, frameworks_markdown, rule_markdown, with_readme_table

        out = Path(write_docs)
        out.mkdir(parents=True, exist_ok=True)
        from advisor.job.rule import load_job_rules

        pages = [*rules, *load_job_rules()]  # job rules get a page too (their validation label)
        for r in pages:
            (out / f"{r.name}.md").write_text(rule_markdown(r), encoding="utf-8")
        (out.parent / "frameworks.md").write_text(frameworks_markdown(rules), encoding="utf-8")
        console.print(f"wrote {len(pages)} rule pages to {out} and {out.parent / 'frameworks.md'}")
        readme = out.resolve().parent.parent / "README.md"
        if readme.is_file() and README_BEGIN in readme.read_text(encoding="utf-8"):
            readme.write_text(with_readme_table(readme.read_text(encoding="utf-8"), rules),
                              encoding="utf-8")
            console.print(f"updated the rules table of {readme}")
        return 0
    if name:
        (rule,) = select(rules, [name])
        console.print(f"[bold]{rule.code} {rule.name}[/] ({rule.category.value}, {rule.status.value})")
        console.print(rule.summary())
        from advisor.engine.rule import validation_text

        console.print(validation_text(rule.validation), style="dim" if rule.validation else "yellow")
        for title, body in rule.documented_sections().items():
            console.print(Markdown(f"### {title}\n\n{body}"))
        if rule.options:
            console.print(Markdown("### Options\n\n" + "\n".join(
                f"- `{key}` (default `{opt.default!r}`"
                f"{', ' + opt.range_text() if opt.range_text() else ''}): {opt.doc}"
                for key, opt in rule.options.items())
                + f"\n\nSet in pyproject.toml under `[tool.advisor.options.{rule.name}]` or with "
                  f"`--rule-option {rule.name}.KEY=VALUE`."))
        return 0
    if console.width < 120:  # a five-column table wraps word by word: one block per rule
        for r in rules:
            console.print(f"[bold]{r.code}[/] [bold cyan]{r.name}[/] "
                          f"[dim]({r.category.value}, {r.status.value})[/]")
            console.print(Padding(r.summary(), (0, 0, 0, 4)))
        return 0
    t = Table()
    for col in ("code", "name", "category", "status", "summary"):
        t.add_column(col)
    for r in rules:
        t.add_row(r.code, r.name, r.category.value, r.status.value, r.summary())
    console.print(t)
    return 0
