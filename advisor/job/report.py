"""The job report: JSON (``advisor-job`` schema 1.0), the console summary and the HTML page.

One `to_dict` feeds all three, so the console, the file for machines and the page for people say
the same thing. Times are milliseconds (``*_ms``) as in the single-rank report.
"""

from __future__ import annotations

import json
import statistics
import sys
from importlib.resources import files
from pathlib import Path
from typing import Any

from advisor.errors import OutputError
from advisor.job.model import Job, rank_ranges
from advisor.job.rule import JobFinding
from advisor.output_paths import write_atomic
from advisor.safe_text import json_text, markup, visible

JOB_SCHEMA = "advisor-job"
JOB_SCHEMA_VERSION = "1.0"
CONSOLE_RANKS = 16
"""Ranks listed one per row on the console; beyond this the straggler and the slowest ones."""


def _ms(ns: float | None) -> float | None:
    return None if ns is None else round(ns / 1e6, 4)


def _finding(f: JobFinding) -> dict[str, Any]:
    e = f.estimate
    return {
        "rule": f.rule, "code": f.code, "message": f.message, "ranks": list(f.ranks),
        "confidence": f.confidence.value, "estimated_speedup": round(e.speedup, 4),
        "speedup_low": round(e.low, 4), "speedup_high": round(e.high, 4),
        "predicted_step_ms": _ms(e.predicted_step_ns), "model": e.model,
        "assumptions": list(e.assumptions),
        "evidence": {"steps": list(f.evidence.steps),
                     "quantities": {k: float(v) for k, v in f.evidence.quantities.items()}},
        "fix": {"title": f.fix.title, "snippet": f.fix.snippet, "kind": f.fix.kind},
        "estimate_withheld": e.withheld,
    }


def comm_share(job: Job) -> tuple[float, float]:
    """(communication share of GPU kernel time, share of communication overlapped with compute),
    over all ranks and aligned steps: HTA's two headline communication figures."""
    comm_k = all_k = comm = hidden = 0
    for r in job.rank_ids:
        for st in job.steps:
            s = job.rank_steps[r][st.index]
            comm_k += s.category_ns.get("communication", 0)
            all_k += sum(s.category_ns.values())
            comm += s.comm_ns
            hidden += s.comm_ns - s.exposed_comm_ns
    return (comm_k / all_k if all_k else 0.0, hidden / comm if comm else 0.0)


def to_dict(job: Job) -> dict[str, Any]:
    share, overlap = comm_share(job)
    med = {k: job.median_by_rank(k) for k in ("rank_time_ns", "rank_busy_ns", "rank_comm_ns",
                                              "rank_exposed_ns", "rank_waiting_ns")}
    s = job.straggler
    return {
        "schema": JOB_SCHEMA, "schema_version": JOB_SCHEMA_VERSION,
        "ranks": [{
            "rank": r.rank, "rank_source": r.rank_source, "path": r.path, "pid": r.pid,
            "device": r.device, "gpu": r.gpu, "steps": len(r.steps), "step_source": r.step_source,
            "notes": r.notes,
            "median_step_ms": _ms(med["rank_time_ns"].get(r.rank)),
            "median_own_work_ms": _ms(med["rank_busy_ns"].get(r.rank)),
            "median_comm_ms": _ms(med["rank_comm_ns"].get(r.rank)),
            "median_exposed_comm_ms": _ms(med["rank_exposed_ns"].get(r.rank)),
            "median_waiting_ms": _ms(med["rank_waiting_ns"].get(r.rank)),
            "pace_share": round(job.pace.get(r.rank, 0.0), 4),
            # the step `advisor analyze` reports for this rank's trace alone (where the
            # per-rank rules ran), and why its steps cannot carry an estimate (None: they can)
            "step_ms": _ms(r.report_step_ns), "estimate_withheld": r.withheld,
        } for r in job.ranks],
        "job": {
            "ranks": len(job.ranks), "steps": [st.index for st in job.steps],
            "median_step_ms": _ms(job.step_ns),
            # the slowest rank's own report step (each rank's trace alone gives the same)
            "step_ms": _ms(job.report_step_ns),
            "estimate_withheld": job.withheld,
            "communication_share_of_kernel_time": round(share, 4),
            "communication_overlapped_share": round(overlap, 4),
            "pace_by_collective": {k: round(v, 4) for k, v in job.pace_collectives.items()},
            "clock_offsets_ms": {str(k): _ms(v) for k, v in job.offsets_ns.items()},
            "notes": job.notes,
        },
        "steps": [{
            "index": st.index, "step_ms": _ms(st.time_ns),
            "rank_step_ms": [_ms(st.rank_time_ns[r]) for r in job.rank_ids],
            "rank_exposed_comm_ms": [_ms(st.rank_exposed_ns[r]) for r in job.rank_ids],
            "rank_waiting_ms": [_ms(st.rank_waiting_ns[r]) for r in job.rank_ids],
            "rank_own_work_ms": [_ms(st.rank_busy_ns[r]) for r in job.rank_ids],
        } for st in job.steps],
        "step_ranks": job.rank_ids,
        "collectives": [{
            "kind": c.kind, "count_per_step": c.count, "total_ms": _ms(c.total_ns),
            "exposed_ms": _ms(c.exposed_ns), "waiting_ms": _ms(c.waiting_ns),
            "host_call_ms": _ms(c.host_ns),
        } for c in job.collectives],
        "straggler": None if s is None else {
            "rank": s.rank, "cause": s.cause, "excess_ms": _ms(s.excess_ns),
            "others_waiting_ms": _ms(s.others_waiting_ns),
            "spent_on_ms": {k: _ms(v) for k, v in s.spent_on.items()},
            "evidence": {k: round(v, 4) for k, v in s.evidence.items()},
        },
        "findings": [_finding(f) for f in job.findings],
        "rank_findings": [{
            "rule": f["rule"], "code": f["code"], "fix": f["fix"], "message": f["message"],
            "fix_snippet": f["fix_snippet"], "fix_kind": f["fix_kind"], "ranks": f["ranks"],
            "all_ranks": f["all_ranks"],
            "speedup": {"min": round(f["speedup_min"], 4), "median": round(f["speedup_median"], 4),
                        "max": round(f["speedup_max"], 4)},
        } for f in job.rank_findings],
    }


def _write(path: str | Path, text: str) -> None:
    """`-` is stdout (as `advisor analyze --json -`); a file is written atomically."""
    if str(path) == "-":
        sys.stdout.write(text)
        return
    try:
        write_atomic(path, text)
    except OSError as e:
        raise OutputError(f"cannot write {path}: {e.strerror}") from e


def write_json(job: Job, path: str | Path) -> None:
    _write(path, json_text(json.dumps(to_dict(job), indent=2)) + "\n")


# ----- console ----------------------------------------------------------------------------------


def render_console(job: Job, console, show_fixes: bool = False) -> None:
    """The job on the console; ``show_fixes`` adds each finding's fix code under it, as
    `advisor analyze --show-fixes` does for one trace."""
    from rich.table import Table

    d = to_dict(job)
    j = d["job"]
    console.print(f"[bold]Job: {j['ranks']} ranks[/], {len(j['steps'])} aligned steps; job step "
                  f"(slowest rank) median [bold]{j['median_step_ms']:.3f} ms[/]; communication "
                  f"{j['communication_share_of_kernel_time']:.0%} of kernel time, "
                  f"{j['communication_overlapped_share']:.1%} of it overlapped with compute")
    if j["step_ms"] is not None:
        console.print(f"Step time: [bold]{j['step_ms']:.3f} ms[/] (the slowest rank's own report "
                      "step: `advisor analyze` of its trace alone gives the same)")
    if j["estimate_withheld"]:
        console.print(f"[yellow]No speedup estimates: {markup(j['estimate_withheld'])}.[/]")
    sources = sorted({r["rank_source"] for r in d["ranks"]})
    console.print(f"[dim]ranks from: {markup(', '.join(sources))}[/]")
    for note in j["notes"]:
        console.print(f"[yellow]note:[/] {markup(note)}")
    t = Table(title="Ranks (median per step)", title_justify="left")
    for col in ("rank", "step", "own work", "comm", "exposed", "waiting", "pace"):
        t.add_column(col, justify="right")
    strag = d["straggler"]["rank"] if d["straggler"] else None
    ranks = d["ranks"]
    if len(ranks) > CONSOLE_RANKS:
        keep = sorted(ranks, key=lambda r: -(r["median_own_work_ms"] or 0))[:CONSOLE_RANKS - 1]
        keep += [r for r in ranks if r["rank"] == strag and r not in keep]
        ranks = sorted(keep, key=lambda r: r["rank"])
        t.caption = f"the {len(ranks)} ranks with the most own work of {len(d['ranks'])}"
    for r in ranks:
        style = "bold red" if r["rank"] == strag else None
        t.add_row(str(r["rank"]), *(f"{r[k]:.3f}" if r[k] is not None else "-" for k in (
            "median_step_ms", "median_own_work_ms", "median_comm_ms", "median_exposed_comm_ms",
            "median_waiting_ms")), f"{r['pace_share']:.0%}", style=style)
    console.print(t)
    if d["collectives"]:
        t = Table(title="Communication per step, by collective (mean over ranks)", title_justify="left")
        for col in ("collective", "kernels", "total ms", "exposed ms", "waiting ms", "host call ms"):
            t.add_column(col, justify="right")
        for c in d["collectives"]:
            t.add_row(markup(c["kind"]), str(c["count_per_step"]), f"{c['total_ms']:.3f}",
                      f"{c['exposed_ms']:.3f}", f"{c['waiting_ms']:.3f}", f"{c['host_call_ms']:.3f}")
        console.print(t)
    if d["straggler"]:
        s = d["straggler"]
        spent = ", ".join(f"{k} {v:+.3f} ms" for k, v in s["spent_on_ms"].items())
        console.print(f"Straggler: [bold red]rank {s['rank']}[/] ({markup(s['cause'])}): the others "
                      f"wait {s['others_waiting_ms']:.3f} ms per step; its extra work: {markup(spent)}")
        if s["cause"].startswith("slower host"):
            console.print("  Its forward, backward and optimizer, run as often as on the others, took "
                          "longer: the CPU, not the code (oversubscribed cores, NUMA placement, "
                          "clocks, or the profiler's own cost). No speedup is promised: time the "
                          "ranks without a profiler, and check their CPU binding "
                          "(torchrun --numa-binding=node).")
    if d["findings"]:
        console.print("[bold]Job findings[/] (estimated speedup of the job's step, best first)")
        for f in d["findings"]:
            est = ("no estimate" if f["estimate_withheld"] else
                   f"[green]{f['estimated_speedup']:.2f}x[/] "
                   f"({f['speedup_low']:.2f}-{f['speedup_high']:.2f})")
            console.print(f"  [bold]{f['rule']}[/] {est}, ranks {rank_ranges(f['ranks'])}")
            console.print(f"    {markup(f['message'])}", soft_wrap=True)
            console.print(f"    fix: {markup(f['fix']['title'])}", soft_wrap=True)
            if show_fixes:
                _fix_code(console, f["fix"]["snippet"], f["fix"]["kind"])
    elif not any(c["count_per_step"] for c in d["collectives"]):
        console.print("[yellow]No collective communication kernels in these traces (a CPU-only or gloo "
                      "job, or a window without collectives): waiting and exposure cannot be measured.[/]")
    else:
        console.print("[green]No job findings: communication is hidden and no rank holds the others back.[/]")
    if d["rank_findings"]:
        t = Table(title="Per-rank findings (one row per rule, spread over the ranks that raised it)",
                  title_justify="left")
        for col in ("rule", "ranks", "speedup (min/median/max)", "fix"):
            t.add_column(col)
        for f in d["rank_findings"]:
            sp = f["speedup"]
            t.add_row(markup(f["rule"]), "all" if f["all_ranks"] else rank_ranges(f["ranks"]),
                      f"{sp['min']:.2f}/{sp['median']:.2f}/{sp['max']:.2f}x", markup(f["fix"]))
        console.print(t)
        if show_fixes:
            for f in d["rank_findings"]:
                console.print(f"  [bold]{markup(f['rule'])}[/]: {markup(f['fix'])}", soft_wrap=True)
                _fix_code(console, f["fix_snippet"], f["fix_kind"])


def _fix_code(console, snippet: str, kind: str) -> None:
    """A fix's code, indented and highlighted as the single-trace console shows it."""
    from rich.padding import Padding
    from rich.syntax import Syntax

    if snippet:
        console.print(Padding(Syntax(visible(snippet), "python" if kind == "code" else "text",
                                     theme="ansi_dark", word_wrap=True, background_color="default"),
                              (0, 0, 0, 5), expand=False))


# ----- HTML -------------------------------------------------------------------------------------


def _heat(values: list[list[float | None]]) -> list[list[tuple[float | None, float]]]:
    """Each cell with its intensity 0..1 against the whole grid's range."""
    flat = [v for row in values for v in row if v is not None]
    lo, hi = (min(flat), max(flat)) if flat else (0.0, 0.0)
    span = (hi - lo) or 1.0
    return [[(v, 0.0 if v is None else (v - lo) / span) for v in row] for row in values]


def write_html(job: Job, path: str | Path) -> None:
    import jinja2

    d = to_dict(job)
    ranks = d["step_ranks"]
    # rank x step grids
    step = [[st["rank_step_ms"][i] for st in d["steps"]] for i in range(len(ranks))]
    own = [[st["rank_own_work_ms"][i] for st in d["steps"]] for i in range(len(ranks))]
    exposed = [[st["rank_exposed_comm_ms"][i] for st in d["steps"]] for i in range(len(ranks))]
    from advisor.report.html_report import shown

    env = jinja2.Environment(loader=jinja2.PackageLoader("advisor.report.templates", "."),
                             autoescape=True, undefined=jinja2.StrictUndefined, finalize=shown)
    template = env.get_template("job.html.j2")
    html = template.render(
        d=d, ranks=ranks, step_grid=_heat(step), own_grid=_heat(own), exposed_grid=_heat(exposed),
        straggler=d["straggler"]["rank"] if d["straggler"] else None,
        rank_ranges=rank_ranges, median=statistics.median,
        css=files("advisor.report.templates").joinpath("report.css").read_text(encoding="utf-8"))
    _write(path, html)
