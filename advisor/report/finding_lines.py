"""One finding as console lines, and the skipped rules, shared by the single-trace summary and a
job's (`advisor.report.job_view`): its own module so both import it from below, not each other."""

from __future__ import annotations

from rich.console import Console
from rich.padding import Padding
from rich.text import Text

from advisor.report.model import Report
from advisor.report.units import console_ms as _ms
from advisor.safe_text import plain, visible


def skipped_lines(rep: Report, console: Console) -> None:
    """The rules that could not run, each reason once."""
    for reason, rules in rep.skipped_by_reason():
        console.print(Text(plain(f"Skipped {', '.join(rules)}: {reason}", 10_000), style="dim"))


def finding_block(console: Console, number: int, f, show_fixes: bool, where: str = "",
                  step_withheld: str | None = None) -> None:
    """One finding as a block (ruff's diagnostics): the rule and estimate, the message,
    ``where`` (a job finding's ranks), the fix; its code with ``show_fixes``. A finding whose
    estimate is withheld for a reason of its own (not ``step_withheld``, the report's, said
    once above the findings) says why under its message."""
    e = f.alone or f.estimate  # a conditional finding heads with its fix alone, its rank
    per = " of the run" if e.relative_to == "run" else ""
    speed = (("no estimate", "yellow"), " ") if e.withheld else (
        (f"{e.speedup:.2f}x{per}", "bold green"),
        f" ({e.low:.2f}-{e.high:.2f}) " + ("alone " if f.alone is not None else ""))
    head = Text.assemble((f"{number}. ", "bold"), (plain(f.rule), "bold cyan"), f" {f.code}  ", *speed,
                         (f.confidence.value, "dim"))
    console.print(head)
    console.print(Padding(Text(plain(f.message, 10_000)), (0, 0, 0, 3), expand=False))
    if where:
        console.print(Padding(Text(plain(where, 10_000), style="dim"), (0, 0, 0, 3), expand=False))
    if e.withheld and e.withheld != step_withheld:
        console.print(Padding(Text(plain(f"no estimate: {e.withheld} (range {e.low:.2f}-"
                                         f"{e.high:.2f})", 10_000), style="yellow"),
                              (0, 0, 0, 3), expand=False))
    if e.floor is not None and e.floor_binds:
        console.print(Padding(Text(plain(f"held at the step's floor: {e.floor.what}, "
                                         f"{_ms(e.floor.ns)} per step", 10_000), style="yellow"),
                              (0, 0, 0, 3), expand=False))
    if f.conditional_on:
        c = f.estimate
        after = ("no estimate" if c.withheld else
                 f"{c.speedup:.2f}x ({c.low:.2f}-{c.high:.2f}) on that step")
        console.print(Padding(Text(plain(f"once {f.conditional_on} is fixed ({f.explained}): "
                                         f"{after}", 10_000), style="yellow"),
                              (0, 0, 0, 3), expand=False))
    if f.validation is None:  # said beside every unchecked estimate (issue 35)
        console.print(Padding(Text("unvalidated: this rule's estimate has no out-of-sample check",
                                   style="yellow"), (0, 0, 0, 3), expand=False))
    console.print(Padding(Text.assemble(("fix: ", "bold"), plain(f.fix.title)), (0, 0, 0, 3), expand=False))
    if show_fixes and f.fix.snippet:
        from rich.syntax import Syntax  # here: it loads pygments, which only --show-fixes uses

        lexer = "python" if f.fix.kind == "code" else "text"
        console.print(Padding(Syntax(visible(f.fix.snippet), lexer, theme="ansi_dark", word_wrap=True,
                                     background_color="default"), (0, 0, 0, 5), expand=False))
