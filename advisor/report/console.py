"""The terminal summary (rich): what the step is made of and what to fix first.

Readable at 80 columns: tables are two columns, and findings are blocks (ruff's diagnostics)
rather than a wide table whose cells wrap word by word. ``show_fixes`` adds each finding's fix
code under it, highlighted as Python.
"""

from __future__ import annotations

from rich.console import Console
from rich.padding import Padding
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from advisor.analysis import Analysis


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms"


def render(analysis: Analysis, console: Console, show_fixes: bool = False) -> None:
    g, s, r = analysis.graph, analysis.summary, analysis.results
    info = g.info
    gpus = ", ".join(sorted({x.name for x in info.gpus})) or "GPU unknown"
    console.print(Text(f"{info.path}", style="bold"), Text(f"({info.format} {info.schema_version})",
                                                           style="dim"))
    console.print(f"GPU: {gpus}")
    for note in info.notes:
        console.print(f"[yellow]note:[/] {note}")
    if not g.has_gpu_work:
        console.print("[yellow]This trace has no GPU work (no kernels, copies or memsets): "
                      "nothing ran on a GPU in the captured window.[/]")
    total_steps = max(info.totals.get("steps", 0), len(g.steps))
    if not s.steps:
        console.print(f"Steps: {total_steps} found, none in steady state to analyse.")
    else:
        busy = s.median_busy_ns / s.median_step_ns if s.median_step_ns else 0.0
        console.print(
            f"Steps: {total_steps} found ({analysis.steps_source}), {s.warmup_steps} warm-up, "
            f"{len(s.steps)} analysed. Step time: median [bold]{_ms(s.median_step_ns)}[/], "
            f"mean {_ms(s.mean_step_ns)}; GPU busy {busy:.0%}"
        )
        overhead = r.profiler_overhead_ns or 0.0
        if overhead > 0.05 * s.median_step_ns:
            console.print(f"[dim]The profiler added about {_ms(overhead)} of host time per step; "
                          f"unprofiled, the median step would take about "
                          f"{_ms(s.median_step_ns - overhead)}. Estimates leave it out.[/]")
        phases = s.phase_medians_ns()
        if phases:
            console.print("Phases (median, GPU-projected)", style="italic")
            t = Table()
            t.add_column("phase")
            t.add_column("time", justify="right")
            for name, ns in phases.items():
                t.add_row(name, _ms(ns))
            console.print(t)
        causes = s.idle_cause_medians_ns()
        if causes:
            console.print("GPU idle per step, by what the host was doing", style="italic")
            t = Table()
            t.add_column("host was in")
            t.add_column("idle", justify="right")
            for name, ns in list(causes.items())[:8]:
                t.add_row(name, _ms(ns))
            console.print(t)
    if r.findings:
        console.print("Findings, by estimated speedup of the whole step", style="italic")
        for i, f in enumerate(r.findings, 1):
            _finding(console, i, f, show_fixes)
        if r.combined:
            c = r.combined
            console.print(f"All fixes together: [bold green]{c.speedup:.2f}x[/] "
                          f"(unprofiled step {_ms(c.step_ns)} -> {_ms(c.predicted_step_ns)})")
    elif s.steps:
        console.print("[green]No findings: nothing in these steps is worth more than 2% of the step.[/]")
    if r.skipped:
        console.print(Text("Skipped: " + "; ".join(f"{x.rule} ({x.reason})" for x in r.skipped),
                           style="dim"))


def _finding(console: Console, number: int, f, show_fixes: bool) -> None:
    e = f.estimate
    head = Text.assemble((f"{number}. ", "bold"), (f.rule, "bold cyan"), f" {f.code}  ",
                         (f"{e.speedup:.2f}x", "bold green"), f" ({e.low:.2f}-{e.high:.2f}) ",
                         (f.confidence.value, "dim"))
    console.print(head)
    console.print(Padding(Text(f.message), (0, 0, 0, 3), expand=False))
    console.print(Padding(Text.assemble(("fix: ", "bold"), f.fix.title), (0, 0, 0, 3), expand=False))
    if show_fixes and f.fix.snippet:
        lexer = "python" if f.fix.kind == "code" else "text"
        console.print(Padding(Syntax(f.fix.snippet, lexer, theme="ansi_dark", word_wrap=True,
                                     background_color="default"), (0, 0, 0, 5), expand=False))
