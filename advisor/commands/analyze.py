"""`advisor analyze TRACE`: read a trace, print the diagnosis, write JSON/HTML reports."""

from __future__ import annotations

from pathlib import Path

import click

from advisor.ingest.base import LoadOptions


@click.command("analyze")
@click.argument("traces", nargs=-1, required=True)
@click.option("--json", "json_out", type=click.Path(path_type=Path), help="Write the JSON result here.")
@click.option("--html", "html_out", type=click.Path(path_type=Path), help="Write the HTML report here.")
@click.option("--rule", "rules", multiple=True, help="Run only these rules (name or code); repeatable.")
@click.option("--max-steps", default=LoadOptions.max_steps, show_default=True,
              help="Steady-state steps to analyse in detail.")
@click.option("--quiet", "-q", is_flag=True, help="No console summary.")
@click.option("--job", "as_job", is_flag=True,
              help="Analyse across ranks even for one file (one nsys report of a whole torchrun job).")
@click.option("--scheduler", metavar="ADDRESS",
              help="Multi-rank: run the per-rank work on this Dask scheduler (default: a local cluster).")
@click.option("--workers", type=click.IntRange(min=1),
              help="Multi-rank: worker processes of the local Dask cluster (default: one per core).")
@click.option("--rank-rules", type=click.Choice(["sample", "all", "none"]), default="sample",
              show_default=True,
              help="Multi-rank: run the per-rank rules on a sample of ranks (the straggler, the "
                   "least loaded, an even spread; every rank up to 8), on all, or on none.")
def command(traces: tuple[str, ...], json_out: Path | None, html_out: Path | None, rules: tuple[str, ...],
            max_steps: int, quiet: bool, as_job: bool, scheduler: str | None, workers: int | None,
            rank_rules: str) -> int:
    """Analyse an Nsight Systems SQLite export or a torch.profiler trace (.json/.json.gz).

    Several TRACES (files, a folder, a glob; one trace per rank) are analysed as one distributed
    job: each rank in a Dask task, then the ranks together (communication, stragglers).
    """
    if as_job or scheduler or workers or len(traces) > 1 or not Path(traces[0]).is_file():
        if not Path(traces[0]).exists() and len(traces) == 1 and not any(c in traces[0] for c in "*?["):
            from advisor.errors import InputError

            raise InputError(f"{traces[0]}: no such file")
        return job_command(traces, json_out, html_out, rules, max_steps, quiet, scheduler, workers,
                           rank_rules)
    from advisor.analysis import analyze

    analysis = analyze(Path(traces[0]), rules, load_options=LoadOptions(max_steps=max_steps))
    emit(analysis, json_out, html_out, quiet)
    return 0


def emit(analysis, json_out: Path | None, html_out: Path | None, quiet: bool) -> None:
    """Render an analysis the way every command does: console, then the files asked for."""
    from rich.console import Console

    from advisor.report import console as console_report

    if json_out:
        from advisor.report.json_report import write_json

        write_json(analysis, json_out)
    if html_out:
        from advisor.report.html_report import write_html

        write_html(analysis, html_out)
    if not quiet:
        console_report.render(analysis, Console(highlight=False))


def job_command(traces: tuple[str, ...], json_out: Path | None, html_out: Path | None,
                rules: tuple[str, ...], max_steps: int, quiet: bool, scheduler: str | None,
                workers: int | None, rank_rules: str = "sample") -> int:
    """`advisor analyze` over several ranks: the job report."""
    from rich.console import Console

    from advisor.job import report
    from advisor.job.api import analyze_job

    err = Console(stderr=True, highlight=False)

    def progress(done: int, total: int) -> None:
        if not quiet and (done == total or done % max(1, total // 10) == 0):
            err.print(f"[dim]ranks summarised: {done}/{total}[/]")

    job = analyze_job(traces, scheduler=scheduler, workers=workers, rule_names=rules,
                      rank_rules=rank_rules, max_steps=max_steps, progress=progress)
    if json_out:
        report.write_json(job, json_out)
    if html_out:
        report.write_html(job, html_out)
    if not quiet:
        report.render_console(job, Console(highlight=False))
    return 0
