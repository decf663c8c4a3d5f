"""The terminal summary (rich): what the step is made of and what to fix first."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from advisor.analysis import Analysis
from advisor.safe_text import markup, plain


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms"


def render(analysis: Analysis, console: Console) -> None:
    g, s, r = analysis.graph, analysis.summary, analysis.results
    info = g.info
    # Every name below comes from the trace: `markup`/`plain` keep it data (advisor.safe_text).
    gpus = ", ".join(sorted({x.name for x in info.gpus})) or "GPU unknown"
    console.print(Text(plain(info.path), style="bold"),
                  Text(plain(f"({info.format} {info.schema_version})"), style="dim"))
    console.print(f"GPU: {markup(gpus)}")
    for note in info.notes:
        console.print(f"[yellow]note:[/] {markup(note)}")
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
            t = Table(title="Phases (median, GPU-projected)", title_justify="left")
            t.add_column("phase")
            t.add_column("time", justify="right")
            for name, ns in phases.items():
                t.add_row(markup(name), _ms(ns))
            console.print(t)
        causes = s.idle_cause_medians_ns()
        if causes:
            t = Table(title="GPU idle per step, by what the host was doing", title_justify="left")
            t.add_column("host was in")
            t.add_column("idle", justify="right")
            for name, ns in list(causes.items())[:8]:
                t.add_row(markup(name), _ms(ns))
            console.print(t)
    if r.findings:
        t = Table(title="Findings (sorted by estimated speedup)", title_justify="left")
        t.add_column("rule")
        t.add_column("speedup", justify="right")
        t.add_column("what")
        t.add_column("fix")
        for f in r.findings:
            e = f.estimate
            t.add_row(markup(f.rule), f"{e.speedup:.2f}x ({e.low:.2f}-{e.high:.2f})",
                      markup(f.message), markup(f.fix.title))
        console.print(t)
        if r.combined:
            c = r.combined
            console.print(f"All fixes together: [bold green]{c.speedup:.2f}x[/] "
                          f"(unprofiled step {_ms(c.step_ns)} -> {_ms(c.predicted_step_ns)})")
    elif s.steps:
        console.print("[green]No findings: nothing in these steps is worth more than 2% of the step.[/]")
    if r.skipped:
        console.print(Text(plain("Skipped: " + "; ".join(f"{x.rule} ({x.reason})"
                                                         for x in r.skipped), 10_000),
                           style="dim"))
