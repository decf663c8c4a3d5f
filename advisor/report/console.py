"""The terminal summary (rich): what the step is made of and what to fix first."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from advisor.analysis import Analysis


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms"


def render(analysis: Analysis, console: Console) -> None:
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
        m = analysis.measured
        if m is not None:
            console.print(
                f"Unprofiled steps (host clock, {m.count} steps outside the window): median "
                f"[bold]{_ms(m.median_ns)}[/], mean {_ms(m.mean_ns)}, p10-p90 "
                f"{_ms(m.p10_ns)}-{_ms(m.p90_ns)}; profiled median {_ms(s.median_step_ns)}. "
                "Estimates are relative to the measured step.")
        overhead = r.profiler_overhead_ns or 0.0
        if m is None and overhead > 0.05 * s.median_step_ns:
            console.print(f"[dim]The profiler added about {_ms(overhead)} of host time per step; "
                          f"unprofiled, the median step would take about "
                          f"{_ms(s.median_step_ns - overhead)}. Estimates leave it out.[/]")
        phases = s.phase_medians_ns()
        if phases:
            t = Table(title="Phases (median, GPU-projected)", title_justify="left")
            t.add_column("phase")
            t.add_column("time", justify="right")
            for name, ns in phases.items():
                t.add_row(name, _ms(ns))
            console.print(t)
        causes = s.idle_cause_medians_ns()
        if causes:
            t = Table(title="GPU idle per step, by what the host was doing", title_justify="left")
            t.add_column("host was in")
            t.add_column("idle", justify="right")
            for name, ns in list(causes.items())[:8]:
                t.add_row(name, _ms(ns))
            console.print(t)
    for w in analysis.warnings:
        console.print(f"[bold yellow]warning:[/] {w}")
    run = analysis.run
    if run is not None and run.run_ns > 0:
        share = run.outside_steady_ns / run.run_ns
        p = run.parts_ns
        console.print(
            f"Whole run: {run.run_ns / 1e9:.2f} s, {run.steps} steps; steady steps "
            f"{p['steady'] / 1e9:.2f} s, outside steady steps {run.outside_steady_ns / 1e9:.2f} s "
            f"({share:.0%}), start-up {p['startup'] / 1e9:.2f} s, warm-up {p['warmup'] / 1e9:.2f} s, "
            f"profiled window {p['profiled'] / 1e9:.2f} s")
        causes = [(k, v) for k, v in run.causes_ns.items() if v >= 0.005 * run.run_ns]
        if causes:
            console.print("  outside steady steps: " + ", ".join(
                f"{k} {v / 1e9:.2f} s" for k, v in sorted(causes, key=lambda kv: -kv[1])))
    if r.findings:
        t = Table(title="Findings (sorted by estimated speedup)", title_justify="left")
        t.add_column("rule")
        t.add_column("speedup", justify="right")
        t.add_column("what")
        t.add_column("fix")
        for f in r.findings:
            e = f.estimate
            per = " of the run" if e.relative_to == "run" else ""
            t.add_row(f.rule, f"{e.speedup:.2f}x{per} ({e.low:.2f}-{e.high:.2f})", f.message,
                      f.fix.title)
        console.print(t)
        if r.combined:
            c = r.combined
            console.print(f"All step fixes together: [bold green]{c.speedup:.2f}x[/] per step "
                          f"(unprofiled step {_ms(c.step_ns)} -> {_ms(c.predicted_step_ns)})")
    elif s.steps:
        console.print("[green]No findings: nothing in these steps is worth more than 2% of the step.[/]")
    if r.skipped:
        console.print(Text("Skipped: " + "; ".join(f"{x.rule} ({x.reason})" for x in r.skipped),
                           style="dim"))
