"""`advisor analyze TRACE`: read a trace, print the diagnosis, write JSON/HTML reports."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

from advisor.errors import InputError, OutputError
from advisor.ingest.base import LoadOptions
from advisor.ingest.input_file import parse_size
from advisor.report.emit import STDOUT

if TYPE_CHECKING:  # imported where used: `advisor analyze TRACE` never loads the job modules
    from advisor.ingest.folder import Skipped


def rule_options(func):
    """The rule-selection flags shared by `analyze` and `profile` (ruff's names)."""
    for decorator in reversed((
        click.option("--select", "--rule", "select", multiple=True, metavar="RULES",
                     help="Run only these rules (names or codes, comma-separated; repeatable). "
                          "Replaces `select` of [tool.advisor]."),
        click.option("--ignore", "ignore", multiple=True, metavar="RULES",
                     help="Do not run these rules (names or codes, comma-separated; repeatable). "
                          "Adds to `ignore` of [tool.advisor]."),
        click.option("--rule-option", "rule_option", multiple=True, metavar="RULE.KEY=VALUE",
                     help="Set a rule's option (`advisor rules NAME` lists them); repeatable."),
        click.option("--isolated", is_flag=True,
                     help="Ignore [tool.advisor] in pyproject.toml."),
    )):
        func = decorator(func)
    return func


def settings_from_cli(select: tuple[str, ...], ignore: tuple[str, ...],
                      rule_option: tuple[str, ...], isolated: bool):
    """[tool.advisor] of the closest pyproject.toml (unless ``--isolated``), then the flags."""
    from advisor.config import settings_from_flags

    return settings_from_flags(select, ignore, rule_option, isolated)


def file_name(ctx: click.Context, param: click.Parameter, value: str | None) -> Path | None:
    """A report's path as typed, refused when spelled as a directory (``out/``, ``out/.``):
    `Path` drops the trailing slash, and ``--json newdir/`` wrote a file named ``newdir``.
    A report is one file, so a directory is an error, as an existing one already is."""
    if value is None:
        return None
    if value != "-" and (value.endswith(("/", os.sep)) or os.path.basename(value) in (".", "..")):
        raise OutputError(f"--{param.name.removesuffix('_out')} {value}: names a directory; "
                          "give a file name")
    return Path(value)


@click.command("analyze")
@click.argument("traces", nargs=-1, required=True)
@click.option("--json", "json_out", type=click.Path(allow_dash=True), callback=file_name,
              help="Write the JSON result here; `-` writes it to stdout (the console summary then "
                   "goes to stderr).")
@click.option("--html", "html_out", type=click.Path(allow_dash=True), callback=file_name,
              help="Write the HTML report here; `-` writes it to stdout (as --json -).")
@rule_options
@click.option("--show-fixes", is_flag=True, help="Show each finding's fix code on the console.")
@click.option("--max-steps", default=LoadOptions.max_steps, show_default=True,
              type=click.IntRange(min=1), help="Steady-state steps to analyse in detail.")
@click.option("--max-unpacked", "max_unpacked", default="32G", show_default=True, metavar="SIZE",
              help="Refuse a gzipped trace that unpacks to more than this (e.g. 500M, 64G); "
                   "one that unpacks to over 200 times its size past 256M is refused too.")
@click.option("--steps", "step_pattern", metavar="REGEX",
              help="The ranges (NVTX, record_function) that are the steps: a regular expression "
                   "searched in range names, instead of the built-in step names.")
@click.option("--pid", type=int, help="The process (rank) to analyse; default: the one with the "
                                      "most steps.")
@click.option("--quiet", "-q", is_flag=True, help="No console summary and no progress display.")
@click.option("--job", "as_job", is_flag=True,
              help="Analyse across ranks even for one file (one nsys report of a whole torchrun job).")
@click.option("--scheduler", metavar="ADDRESS",
              help="Multi-rank: run the per-rank work on this Dask scheduler, tcp://HOST:PORT "
                   "(default: a local cluster).")
@click.option("--workers", type=click.IntRange(min=1),
              help="Multi-rank: worker processes of the local Dask cluster (default and most: "
                   "one per core, and one per rank).")
@click.option("--rank-rules", type=click.Choice(["sample", "all", "none"]), default="sample",
              show_default=True,
              help="Multi-rank: run the per-rank rules on a sample of ranks (the straggler, the "
                   "least loaded, an even spread; every rank up to 8), on all, or on none.")
def command(traces: tuple[str, ...], json_out: Path | None, html_out: Path | None,
            select: tuple[str, ...], ignore: tuple[str, ...], rule_option: tuple[str, ...],
            isolated: bool, show_fixes: bool, max_steps: int, max_unpacked: str,
            step_pattern: str | None, pid: int | None, quiet: bool, as_job: bool,
            scheduler: str | None, workers: int | None, rank_rules: str) -> int:
    """Analyse an Nsight Systems SQLite export or a torch.profiler trace (.json/.json.gz).

    Several TRACES (files, a folder, a glob; one trace per rank) are analysed as one distributed
    job: each rank in a Dask task, then the ranks together (communication, stragglers).

    Rules are picked and configured by [tool.advisor] in the closest pyproject.toml (from the
    working directory upward), then by --select/--ignore/--rule-option. While it works, a
    progress display runs on stderr when stderr is a terminal.
    """
    from advisor.output_paths import check_outputs
    from advisor.report.emit import emit
    from advisor.report.progress import Progress

    try:
        cap = parse_size(max_unpacked)
    except ValueError as e:
        raise InputError(f"--max-unpacked {max_unpacked!r}: not a size like 500M or 32G "
                         "(a finite number of bytes, at least 1)") from e
    if scheduler is not None:  # before Dask is imported (seconds): a bad address fails at once
        from advisor.job.scheduler import checked_address

        scheduler = checked_address(scheduler)
    if json_out == STDOUT and html_out == STDOUT:
        raise OutputError("--json - and --html - both ask for stdout; give one of them a file")
    settings = settings_from_cli(select, ignore, rule_option, isolated)
    options = LoadOptions(max_steps=max_steps, max_unpacked_bytes=cap, step_pattern=step_pattern,
                          pid=pid)
    if as_job or scheduler or workers or len(traces) > 1 or _names_ranks(traces[0]):
        from advisor.job.inputs import expand_inputs

        # a folder's or a glob's files are inputs too: a report must never be written over one
        found = expand_inputs(traces)
        check_outputs(found[0], {"--json": json_out, "--html": html_out})
        return job_command(traces, json_out, html_out, options, quiet, scheduler, workers,
                           rank_rules, settings=settings, show_fixes=show_fixes, found=found)
    trace = Path(traces[0])
    check_outputs([trace], {"--json": json_out, "--html": html_out})
    progress = Progress.on_stderr(quiet)
    analysis = run_analysis(trace, options, settings, progress)
    emit(analysis, json_out, html_out, quiet, show_fixes=show_fixes, progress=progress)
    return 0


def run_analysis(trace: Path, load_options: LoadOptions, settings, progress):
    """Read the trace and run the rules, each stage shown by ``progress``."""
    from advisor.analysis import AnalysisInput, analyze_shown
    from advisor.ingest.base import load_trace

    with progress.stage(f"reading {trace}") as stage:
        graph = load_trace(trace, load_options)
        stage.done(f"read {trace.name}: {len(graph.gpu_ops):,} GPU ops, {len(graph.steps)} steps found")
    return analyze_shown(AnalysisInput.of(graph, settings), progress)


def _names_ranks(arg: str) -> bool:
    """One argument names several rank traces when it is a folder or a glob that is no file;
    anything else (a file, a FIFO, a missing or unusable path) takes the single-trace path and
    its input checks (`advisor.ingest.input_file`)."""
    try:
        p = Path(arg)
        return p.is_dir() or (any(c in arg for c in "*?[") and not p.exists())
    except OSError:  # a name too long for the filesystem: the single-trace path says so
        return False


def job_command(traces: tuple[str, ...], json_out: Path | None, html_out: Path | None,
                options: LoadOptions, quiet: bool, scheduler: str | None, workers: int | None,
                rank_rules: str = "sample", settings=None, show_fixes: bool = False,
                found: tuple[list[Path], list[Skipped]] | None = None) -> int:
    """`advisor analyze` over several ranks: the job's report, written as one trace's is.
    ``options`` read each rank's trace as one trace is read; ``settings`` pick and configure
    the rank and job rules; ``found``, the traces' files as `expand_inputs` found them."""
    from advisor.job.api import analyze_job, rank_progress
    from advisor.report.emit import emit
    from advisor.report.job_report import build_job_report

    job = analyze_job(traces, scheduler=scheduler, workers=workers, rank_rules=rank_rules,
                      load_options=options, settings=settings, progress=rank_progress(quiet),
                      found=found)
    emit(build_job_report(job), json_out, html_out, quiet, show_fixes=show_fixes)
    return 0
