"""The job section's JSON (``advisor-job`` schema) and console views.

A job's `Report` carries the job rules' findings like a trace's report carries its rules', so
both views reuse the single-trace pieces: the JSON finding record (`finding_record.finding_dict`,
plus the ranks) and the console's finding block (`finding_lines.finding_block`, wrapped at the
console's width: 80 columns where it is not a terminal). What only a job has (ranks, collectives,
the straggler, the rank-by-step grid, the rank rules' findings) is rendered here.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from advisor.engine.runner import MIN_SPEEDUP
from advisor.report.job_section import JobSection
from advisor.report.model import Report
from advisor.report.units import number_runs
from advisor.report.units import to_ms as _ms
from advisor.safe_text import markup, plain, visible

JOB_SCHEMA = "advisor-job"
JOB_SCHEMA_VERSION = "1.1"  # 1.1: findings as the single-trace report's records (category,
# saved_ms_per_step, step_ms, floor, fix.mechanism/framework ...) plus ranks; below_threshold,
# skipped, job.verdict, ranks[].median_host_floor_ms
CONSOLE_RANKS = 16
"""Ranks listed one per row on the console; beyond this the straggler and the slowest ones."""
CONSOLE_STEPS = 8
"""Steps of the console's rank-by-step grid (the last ones): 8 columns fit in 80."""
HIDDEN_SHARE = 0.02
"""Exposed communication under this share of the job's step is "hidden": what no rule would
report (a fix must be worth 2% of the step, `advisor.engine.runner.MIN_SPEEDUP`)."""


def _section(rep: Report) -> JobSection:
    if rep.job is None:
        raise ValueError("not a job's report")
    return rep.job


def rank_ranges(ids: tuple[int, ...] | list[int]) -> str:
    """[0, 1, 2, 5] -> "0-2, 5"."""
    return number_runs(ids, "-")


def _ranks_text(ranks: tuple[int, ...]) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {rank_ranges(ranks)}"


def verdict(rep: Report) -> str:
    """What the job's findings add up to, in one sentence the numbers above it agree with.

    With no finding, exposed communication is called hidden only when it is: under
    `HIDDEN_SHARE` of the step. Otherwise the sentence says what the rules found of it and
    why it is not worth fixing (a rule matched it under the threshold: the fix's estimate, and
    what holds the step up when a floor does). On HTA's two sampled ranks 152-168 ms per 615 ms
    step ran exposed while the hosts' own work held the step: hiding it gains nothing."""
    job = _section(rep)
    if rep.findings:
        return ""
    if not job.has_collectives:
        return ("No collective communication kernels in these traces (a CPU-only or gloo job, "
                "or a window without collectives): waiting and exposure cannot be measured.")
    straggling = ("" if job.straggler is None else
                  f"; rank {job.straggler.rank} is slowest ({job.straggler.cause})")
    exposed = job.exposed_ns
    step = job.step_ns or 1.0
    if exposed < HIDDEN_SHARE * step:
        return (f"No job findings: communication is hidden ({exposed / 1e6:.3f} ms of it exposed "
                f"per step){straggling or ' and no rank holds the others back'}.")
    head = (f"No job findings: {exposed / 1e6:.3f} ms of communication per step runs with no "
            f"compute beside it ({exposed / step:.0%} of the step)")
    below = [f for f in rep.below_threshold if f.rule == "exposed-communication"]
    if not below:
        return head + f", but no rule estimates fixing it at {MIN_SPEEDUP:.2f}x or more{straggling}."
    e = below[0].estimate
    why = (f": {e.floor.what} is {e.floor.ns / 1e6:.3f} ms per step and holds the step, "
           "which hiding GPU time does not shorten" if e.floor is not None and e.floor_binds else "")
    return head + f", but hiding it gains only {e.speedup:.2f}x{why}{straggling}."


# ----- JSON -------------------------------------------------------------------------------------


def job_dict(rep: Report) -> dict[str, Any]:
    """The ``advisor-job`` JSON result of a job's report."""
    from advisor.report.finding_record import below_dict, finding_dict

    job = _section(rep)
    s = job.straggler
    return {
        "schema": JOB_SCHEMA, "schema_version": JOB_SCHEMA_VERSION,
        "ranks": [{
            "rank": r.rank, "rank_source": r.rank_source, "path": r.path, "pid": r.pid,
            "device": r.device, "gpu": r.gpu, "steps": r.steps, "step_source": r.step_source,
            "notes": list(r.notes),
            "median_step_ms": _ms(r.median_step_ns),
            "median_own_work_ms": _ms(r.median_own_work_ns),
            "median_comm_ms": _ms(r.median_comm_ns),
            "median_exposed_comm_ms": _ms(r.median_exposed_comm_ns),
            "median_waiting_ms": _ms(r.median_waiting_ns),
            "median_host_floor_ms": _ms(r.median_host_floor_ns),
            "pace_share": round(r.pace_share, 4),
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
            "communication_share_of_kernel_time": round(job.comm_share, 4),
            "communication_overlapped_share": round(job.overlap_share, 4),
            "pace_by_collective": {k: round(v, 4) for k, v in job.pace_by_collective.items()},
            "clock_offsets_ms": {str(k): _ms(v) for k, v in job.clock_offsets_ns.items()},
            "notes": list(job.notes),
            "verdict": verdict(rep) or None,
        },
        "steps": [{
            "index": st.index, "step_ms": _ms(st.time_ns),
            "rank_step_ms": [_ms(v) for v in st.rank_time_ns],
            "rank_exposed_comm_ms": [_ms(v) for v in st.rank_exposed_ns],
            "rank_waiting_ms": [_ms(v) for v in st.rank_waiting_ns],
            "rank_own_work_ms": [_ms(v) for v in st.rank_own_work_ns],
        } for st in job.steps],
        "step_ranks": list(job.step_ranks),
        "collectives": [{
            "kind": c.kind, "count_per_step": c.count_per_step, "total_ms": _ms(c.total_ns),
            "exposed_ms": _ms(c.exposed_ns), "waiting_ms": _ms(c.waiting_ns),
            "host_call_ms": _ms(c.host_ns),
        } for c in job.collectives],
        "straggler": None if s is None else {
            "rank": s.rank, "cause": s.cause, "excess_ms": _ms(s.excess_ns),
            "others_waiting_ms": _ms(s.others_waiting_ns),
            "spent_on_ms": {k: _ms(v) for k, v in s.spent_on_ns.items()},
            "evidence": {k: round(v, 4) for k, v in s.evidence.items()},
        },
        "findings": [{**finding_dict(rf), "ranks": list(rf.finding.ranks)} for rf in rep.findings],
        "below_threshold": [below_dict(f) for f in rep.below_threshold],
        "skipped": [{"rule": x.rule, "reason": x.reason} for x in rep.skipped],
        "rank_findings": [{
            "rule": f.rule, "code": f.code, "fix": f.fix, "message": f.message,
            "fix_snippet": f.fix_snippet, "fix_kind": f.fix_kind, "ranks": list(f.ranks),
            "all_ranks": f.all_ranks,
            "speedup": {"min": round(f.speedup_min, 4), "median": round(f.speedup_median, 4),
                        "max": round(f.speedup_max, 4)},
        } for f in job.rank_findings],
    }


# ----- console ----------------------------------------------------------------------------------


def _f(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1e6:.2f}"


def render_job(rep: Report, console: Console, show_fixes: bool = False) -> None:
    """The job on the console, at the console's width; ``show_fixes`` adds each finding's fix
    code under it, as `advisor analyze --show-fixes` does for one trace."""
    from advisor.report.finding_lines import finding_block, skipped_lines

    job = _section(rep)
    console.print(Text.assemble(("Job: ", "bold"), plain(
        f"{len(job.ranks)} ranks, {len(job.steps)} aligned steps; job step (the slowest "
        f"rank's) median {job.step_ns / 1e6:.3f} ms; communication {job.comm_share:.0%} of "
        f"kernel time, {job.overlap_share:.1%} of it overlapped with compute", 10_000)))
    if job.report_step_ns:
        console.print(f"Step time: [bold]{job.report_step_ns / 1e6:.3f} ms[/] (the slowest "
                      "rank's own report step: `advisor analyze` of its trace alone gives the "
                      "same)")
    if job.withheld:
        console.print(f"[yellow]No speedup estimates: {markup(job.withheld, 10_000)}.[/]")
    sources = sorted({r.rank_source for r in job.ranks})
    console.print(Text(plain(f"ranks from: {', '.join(sources)}", 10_000), style="dim"))
    for note in job.notes:
        console.print(Text.assemble(("note: ", "yellow"), plain(note, 10_000)))
    _rank_table(job, console)
    _collective_table(job, console)
    _grid(job, console)
    if job.straggler is not None:
        s = job.straggler
        spent = ", ".join(f"{k} {v / 1e6:+.3f} ms" for k, v in s.spent_on_ns.items())
        console.print(Text.assemble(("Straggler: ", "bold"), (f"rank {s.rank}", "bold red"), plain(
            f" ({s.cause}): the others wait {s.others_waiting_ns / 1e6:.3f} ms per step; its "
            f"extra work: {spent}", 10_000)))
        if s.slower_host:
            console.print(Padding(Text(
                "Its forward, backward and optimizer, run as often as on the others, took "
                "longer: the CPU, not the code (oversubscribed cores, NUMA placement, clocks, or "
                "the profiler's own cost). No speedup is promised: time the ranks without a "
                "profiler, and check their CPU binding (torchrun --numa-binding=node)."),
                (0, 0, 0, 2), expand=False))
    if rep.findings:
        console.print("Job findings, by estimated speedup of the job's step", style="italic")
        for i, rf in enumerate(rep.findings, 1):
            finding_block(console, i, rf.finding, show_fixes,
                          where=_ranks_text(rf.finding.ranks), step_withheld=job.withheld)
    else:
        line = verdict(rep)
        style = "green" if line.startswith("No job findings: communication is hidden") else "yellow"
        console.print(Text(plain(line, 10_000), style=style))
    _rank_findings(job, console, show_fixes)
    skipped_lines(rep, console)


def _rank_table(job: JobSection, console: Console) -> None:
    t = Table(title="Ranks (median per step, ms)", title_justify="left")
    for col in ("rank", "step", "own work", "comm", "exposed", "waiting", "pace"):
        t.add_column(col, justify="right")
    strag = job.straggler_rank
    ranks = list(job.ranks)
    if len(ranks) > CONSOLE_RANKS:
        keep = sorted(ranks, key=lambda r: -(r.median_own_work_ns or 0))[:CONSOLE_RANKS - 1]
        keep += [r for r in ranks if r.rank == strag and r not in keep]
        ranks = sorted(keep, key=lambda r: r.rank)
        t.caption = f"the {len(ranks)} ranks with the most own work of {len(job.ranks)}"
    for r in ranks:
        t.add_row(str(r.rank), _f(r.median_step_ns), _f(r.median_own_work_ns), _f(r.median_comm_ns),
                  _f(r.median_exposed_comm_ns), _f(r.median_waiting_ns), f"{r.pace_share:.0%}",
                  style="bold red" if r.rank == strag else None)
    console.print(t)


def _collective_table(job: JobSection, console: Console) -> None:
    rows = [c for c in job.collectives if c.count_per_step or c.host_ns]
    if not rows:
        return
    t = Table(title="Communication per step, by collective (ms, mean over ranks)",
              title_justify="left")
    for col in ("collective", "kernels", "total", "exposed", "waiting", "host calls"):
        t.add_column(col, justify="right")
    for c in rows:
        t.add_row(markup(c.kind), str(c.count_per_step), _f(c.total_ns), _f(c.exposed_ns),
                  _f(c.waiting_ns), _f(c.host_ns))
    console.print(t)


def _grid(job: JobSection, console: Console) -> None:
    """Rank by step: each rank's step time (ms) in its last `CONSOLE_STEPS` aligned steps, the
    slowest rank of each step in bold (the HTML page draws every step as heatmaps)."""
    steps = job.steps[-CONSOLE_STEPS:]
    if len(job.step_ranks) < 2 or not steps:
        return
    console.print("Step time per rank and step (ms; bold: each step's slowest rank)",
                  style="italic")
    t = Table()
    t.add_column("rank", justify="right")
    for st in steps:
        t.add_column(str(st.index), justify="right")
    strag = job.straggler_rank
    shown = job.step_ranks
    if len(shown) > CONSOLE_RANKS:
        shown = tuple(sorted({*shown[:CONSOLE_RANKS - 1], *([strag] if strag is not None else [])}))
    for rank in shown:
        i = job.step_ranks.index(rank)
        cells = [Text(f"{st.rank_time_ns[i] / 1e6:.1f}",
                      style="bold" if st.rank_time_ns[i] == max(st.rank_time_ns) else "")
                 for st in steps]
        t.add_row(Text(str(rank), style="bold red" if rank == strag else ""), *cells)
    console.print(t)


def _rank_findings(job: JobSection, console: Console, show_fixes: bool) -> None:
    if not job.rank_findings:
        return
    console.print("Per-rank findings (one per rule, over the ranks that raised it)",
                  style="italic")
    for f in job.rank_findings:
        ranks = "all ranks" if f.all_ranks else _ranks_text(f.ranks)
        console.print(Text.assemble((plain(f.rule), "bold cyan"), f" {plain(f.code)}  ",
                                    (f"{f.speedup_min:.2f}/{f.speedup_median:.2f}/"
                                     f"{f.speedup_max:.2f}x", "bold green"),
                                    (" (min/median/max) ", "dim"), plain(ranks)))
        console.print(Padding(Text(plain(f.message, 10_000)), (0, 0, 0, 3), expand=False))
        console.print(Padding(Text.assemble(("fix: ", "bold"), plain(f.fix, 10_000)),
                              (0, 0, 0, 3), expand=False))
        if show_fixes and f.fix_snippet:
            from rich.syntax import Syntax

            console.print(Padding(Syntax(visible(f.fix_snippet),
                                         "python" if f.fix_kind == "code" else "text",
                                         theme="ansi_dark", word_wrap=True,
                                         background_color="default"), (0, 0, 0, 5), expand=False))
