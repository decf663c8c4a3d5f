"""The terminal summary (rich): what the step is made of and what to fix first.

Readable at 80 columns: tables are two columns, and findings are blocks (ruff's diagnostics)
rather than a wide table whose cells wrap word by word. ``show_fixes`` adds each finding's fix
code under it, highlighted as Python.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from advisor.analysis import Analysis
from advisor.graph.kernels import short_name
from advisor.report import source_view
from advisor.report.finding_lines import finding_block, skipped_lines
from advisor.report.model import Report, as_report
from advisor.report.units import console_ms as _ms
from advisor.report.units import fmt_bytes as _bytes
from advisor.safe_text import markup, plain

if TYPE_CHECKING:  # annotations only: start-up of `advisor analyze` (issue #39)
    from advisor.graph.trace_summary import TraceSummary
    from advisor.report.tried import Tried


def render(source: Report | Analysis, console: Console, show_fixes: bool = False) -> None:
    rep = as_report(source)
    if rep.job is not None:  # a distributed job: its section, its findings
        from advisor.report.job_view import render_job

        render_job(rep, console, show_fixes)
        return
    st = rep.steps
    info = rep.trace
    # Every name below comes from the trace: `markup`/`plain` keep it data (advisor.safe_text).
    gpus = ", ".join(sorted({x.name for x in info.gpus})) or "GPU unknown"
    console.print(Text(plain(info.path), style="bold"),
                  Text(plain(f"({info.format} {info.schema_version})"), style="dim"))
    console.print(f"GPU: {markup(gpus)}")
    for note in info.notes:
        console.print(f"[yellow]note:[/] {markup(note)}")
    if not rep.has_gpu_work:
        console.print("[yellow]This trace has no GPU work (no kernels, copies or memsets): "
                      "nothing ran on a GPU in the captured window.[/]")
    total_steps = st.count
    basis = st.basis
    withheld = None  # the report's reason to withhold every estimate, said once
    if basis is not None:
        console.print(f"Analysed: {markup(basis.describe(), 10_000)}")
    if st.median_ns is None or st.busy_median_ns is None:
        console.print(f"Steps: {total_steps} found, none in steady state to analyse.")
        if rep.whole_trace is not None and rep.has_gpu_work:
            _whole_trace(rep.whole_trace, console)
    else:
        median = st.median_ns
        base = rep.baseline_step_ns or median
        busy = st.busy_median_ns / median if median else 0.0
        console.print(
            f"Steps: {total_steps} found, {st.warmup} warm-up, {st.analysed} analysed. "
            f"Step time: [bold]{_ms(base)}[/] (mean, the baseline of every estimate below); "
            f"GPU busy {busy:.0%}"
        )
        withheld = (basis.withheld if basis is not None else None) or (
            "the profiler-overhead correction leaves the range it was fitted on (the warning "
            "below says how far)" if rep.replay.out_of_range else None)
        if withheld:
            console.print(f"[yellow]No speedup estimates: {markup(withheld, 10_000)}.[/]")
        line = efficiency_line(rep)
        if line:
            console.print(line)
        m = st.measured
        if m is not None:
            console.print(
                f"Unprofiled steps (host clock, {m.count} steps outside the window): mean "
                f"[bold]{_ms(m.mean_ns)}[/]; profiled median {_ms(median)}. "
                + ("[yellow]Not used: the host was too noisy to measure on.[/]" if m.noisy else
                   "Estimates are relative to this measured mean step."))
            for line in m.describe():
                console.print(f"  {markup(line)}")
        overhead = rep.replay.profiler_overhead_ns or 0.0
        if m is None and overhead > 0.05 * base:
            err = (rep.replay.calibration or {}).get("expected_error")
            good_to = (" Taken out per event as calibrated on the H100, it takes the step "
                       "further down than on any capture the costs were fitted on: the step is "
                       "extrapolated; `advisor profile` measures it instead."
                       if rep.replay.out_of_range else "" if err is None else
                       f" Taken out per event as calibrated on the H100, the step is good to "
                       f"about ±{err:.0%} (its error on the captures it was checked on); "
                       "`advisor profile` measures it instead.")
            console.print(f"[dim]The tracing profiler added about {_ms(overhead)} of host time "
                          f"per step; the step time above and every estimate leave it out."
                          f"{good_to}[/]")
        phases = st.phases_ns
        if phases:
            console.print("Phases (median, GPU-projected)", style="italic")
            t = Table()
            t.add_column("phase")
            t.add_column("time", justify="right")
            for name, ns in phases.items():
                t.add_row(markup(name), _ms(ns))
            console.print(t)
        causes = st.idle_causes_ns
        if causes:
            console.print("GPU idle per step, by what the host was doing", style="italic")
            t = Table()
            t.add_column("host was in")
            t.add_column("idle", justify="right")
            for name, ns in list(causes.items())[:8]:
                t.add_row(markup(name), _ms(ns))
            console.print(t)
        if rep.source is not None:
            source_view.render_console(console, rep.source)
    for w in rep.warnings:
        console.print(f"[bold yellow]warning:[/] {markup(w)}")
    run = rep.run
    if run is not None and run.run_ns > 0:
        share = run.outside_steady_ns / run.run_ns
        p = run.parts_ns
        console.print(
            f"Whole run: {run.run_ns / 1e9:.2f} s, {run.steps} steps; steady steps "
            f"{p['steady'] / 1e9:.2f} s, outside steady steps {run.outside_steady_ns / 1e9:.2f} s "
            f"({share:.0%}), start-up {p['startup'] / 1e9:.2f} s, warm-up {p['warmup'] / 1e9:.2f} s, "
            f"profiled window {p['profiled'] / 1e9:.2f} s")
        total = run.total
        if total is not None and (total.step_fixes_saved_ns or total.run_fixes_saved_ns):
            console.print(
                f"  with every fix: {total.run_ns / 1e9:.2f} s -> {total.after_ns / 1e9:.2f} s "
                f"({total.speedup:.2f}x of the run): step fixes save "
                f"{total.step_fixes_saved_ns / 1e9:.2f} s of the steady steps, run fixes "
                f"{total.run_fixes_saved_ns / 1e9:.2f} s outside them")
        causes = [(k, v) for k, v in run.causes_ns.items() if v >= 0.005 * run.run_ns]
        if causes:
            console.print("  outside steady steps: " + ", ".join(
                f"{k} {v / 1e9:.2f} s" for k, v in sorted(causes, key=lambda kv: -kv[1])))
    findings = [rf.finding for rf in rep.findings]
    fw = rep.framework
    if fw is not None and findings:
        console.print(Text(plain(f"Fixes for: {fw.describe()}", 10_000), style="dim"))
    if findings:
        console.print("Findings, by estimated speedup of the whole step", style="italic")
        for i, f in enumerate(findings, 1):
            finding_block(console, i, f, show_fixes, step_withheld=withheld)
            if rep.source is not None:
                source_view.render_finding_lines(console, rep.source, i - 1)
        if rep.combined and not rep.combined.withheld:
            c = rep.combined
            console.print(f"All step fixes together: [bold green]{c.speedup:.2f}x[/] per step "
                          f"(unprofiled step {_ms(c.step_ns)} -> {_ms(c.predicted_step_ns)})")
            for line in combination_lines(c):
                console.print(Padding(Text(plain(line, 10_000), style="dim"), (0, 0, 0, 2),
                                      expand=False))
    elif st.analysed:
        console.print("[green]No findings: nothing in these steps is worth more than 2% of the step.[/]")
    skipped_lines(rep, console)
    if rep.tried is not None:  # `advisor profile --try`: measurements beside the estimates
        render_tried(rep.tried, console)


def render_tried(tried: Tried, console: Console) -> None:
    """`advisor profile --try`'s section: each fix's estimate beside its measurement."""
    from advisor.report.tried import console_lines

    for i, line in enumerate(console_lines(tried)):
        indent = len(line) - len(line.lstrip())
        console.print(Padding(Text(plain(line.lstrip(), 10_000),
                                   style="italic" if i == 0 else ""), (0, 0, 0, indent)))


def combination_lines(c) -> list[str]:
    """How the fixes combine (each after the ones before it, a conditional one right after
    the fix it depends on) and the floor that binds the step they leave."""
    out = []
    if len(c.path) > 1:
        out.append("path: " + ", then ".join(
            f"{p.rule}{f' (after {p.after})' if p.after else ''} {_ms(p.predicted_step_ns)}"
            for p in c.path))
    if c.floor is not None:
        held = "; it holds the estimate up" if c.floor_binds else ""
        out.append(f"floor: {c.floor.what}, {_ms(c.floor.ns)} per step{held}")
    return out


def efficiency_line(rep: Report) -> str:
    """One headline line: the step's MFU against its datatype's peak, and the share of GEMM
    time on tensor cores (advisor.engine.efficiency); empty when neither is known."""
    e = rep.efficiency
    if e is None or (e.mfu is None and e.tensor_core_share is None):
        return ""
    parts = [e.mfu_text(0, peak=True)]
    if e.tensor_core_share is not None:
        parts.append(f"tensor cores {e.tensor_core_share:.0%} of GEMM time")
    return markup("; ".join(parts), 10_000)


def _whole_trace(t: TraceSummary, console: Console) -> None:
    share = t.busy_share
    console.print(
        f"Whole trace: {_ms(t.span_ns)} of GPU activity on {t.devices} device(s), GPU busy "
        f"{_ms(t.busy_ns)} ({share:.0%}), idle {_ms(t.idle_ns)}; {t.kernels} kernels; "
        f"communication {t.communication_share or 0.0:.1%} of GPU time; host blocked in "
        f"{t.sync_calls} synchronizations for {_ms(t.sync_ns)}"
    )
    if t.copies:
        console.print("Copies: " + "; ".join(
            f"{c.kind} x{c.count} {_bytes(c.bytes)} in {_ms(c.total_ns)}" for c in t.copies))
    if t.top_kernels:
        table = Table(title="Top kernels (whole trace)", title_justify="left")
        table.add_column("kernel")
        table.add_column("category")
        table.add_column("count", justify="right")
        table.add_column("time", justify="right")
        table.add_column("share", justify="right")
        gpu = t.gpu_ns or 1
        for k in t.top_kernels:
            table.add_row(markup(short_name(k.name)), markup(k.category), str(k.count), _ms(k.total_ns),
                          f"{k.total_ns / gpu:.1%}")
        console.print(table)
