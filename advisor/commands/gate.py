"""`advisor gate BASELINE CANDIDATE`: may the candidate run merge? Exit 0 pass, 1 regression,
2 could not compare (fail closed).

The verdict goes to stdout (what regressed, by how much, which rules); the CI outputs go to the
files asked for, also when the runs could not be compared, before the error reaches the CLI's
one error funnel.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import click

from advisor.commands.numbers import FiniteFloatRange
from advisor.errors import AdvisorError, AnalysisError
from advisor.ingest.base import LoadOptions

ALL_STEPS = 2**62
"""``max_steps`` that loads every step of a trace (the loaders' window then holds them all)."""


def _is_job(p: Path) -> bool:
    """A folder or a glob of rank traces is a distributed job."""
    return p.is_dir() or any(ch in str(p) for ch in "*?[")


def _job_gate(baseline: Path, candidate: Path, threshold: float, load_options: LoadOptions,
              github_annotations: bool) -> int:
    from advisor.gate.job import compare_jobs, gate_input, render, render_annotations
    from advisor.job.api import analyze_job

    base = analyze_job([baseline], rank_rules="none", load_options=load_options)
    cand = analyze_job([candidate], rank_rules="none", load_options=load_options)
    result = compare_jobs(gate_input(base), gate_input(cand), threshold)
    click.echo(render(result), nl=False)  # made safe and wrapped by `render`
    if github_annotations:
        click.echo(render_annotations(result), nl=False)
    if result.status == "inconclusive":
        raise AnalysisError("gate inconclusive: " + result.reason)
    return result.exit_code


@click.command("gate")
@click.argument("baseline", type=click.Path(path_type=Path))
@click.argument("candidate", type=click.Path(path_type=Path))
@click.option("--threshold", default=5.0, show_default=True,
              type=FiniteFloatRange(min=0, min_open=True, max=1000),
              help="Step-time increase, in percent, that fails when also significant.")
@click.option("--allow", "allow", multiple=True, metavar="RULE",
              help="Accept regressions named by this rule (name or code); repeatable.")
@click.option("--markdown", "markdown_out", type=click.Path(path_type=Path),
              help="Write a markdown summary (PR comment, $GITHUB_STEP_SUMMARY) here.")
@click.option("--junit", "junit_out", type=click.Path(path_type=Path),
              help="Write JUnit XML here.")
@click.option("--github-annotations", is_flag=True,
              help="Also print GitHub Actions annotations (::error ...) to stdout.")
@click.option("--json", "json_out", type=click.Path(path_type=Path),
              help="Write the verdict as JSON here.")
@click.option("--steps", "step_pattern", metavar="REGEX",
              help="The ranges that are the steps in both traces (see `advisor analyze`).")
@click.option("--pid", type=click.IntRange(min=0, max=2**63 - 1),
              help="The process (rank) to compare in both traces.")
@click.option("--max-steps", "max_steps", type=click.IntRange(min=1, max=10**9),
              help="Judge only this many steady steps of each trace (a huge trace); the "
                   "verdict says how many of how many. Default: every step the trace holds.")
@click.option("--isolated", is_flag=True,
              help="Ignore [tool.advisor] in pyproject.toml: every rule runs (the pull request "
                   "the gate judges may change that file; the verdict names any rule it "
                   "deselects).")
@click.option("--step-times", "step_times", default="auto", show_default=True,
              type=click.Choice(["auto", "profiled", "tried"]),
              help="Which steps the step time is judged on: the plain `advisor profile --try` "
                   "runs' unprofiled steps when both results carry them (auto), always the "
                   "profiled steps, or the --try steps or exit 2.")
def command(baseline: Path, candidate: Path, threshold: float, allow: tuple[str, ...],
            markdown_out: Path | None, junit_out: Path | None, github_annotations: bool,
            json_out: Path | None, step_pattern: str | None, pid: int | None,
            step_times: str = "auto", max_steps: int | None = None,
            isolated: bool = False) -> int:
    """Compare two runs of one training step (traces or `advisor analyze --json` results)
    and decide whether CANDIDATE may replace BASELINE. Folders or globs of rank traces compare
    two distributed jobs by the job's step and name the rank and collective that regressed.

    Exit 0: pass. 1: regression (stdout says what, by how much, and the rules). 2: could not
    compare (unreadable input, no steps, different workloads, too few or too noisy steps).
    """
    from advisor.gate.outputs import OutputRequest, check_requested, clear_outputs

    # The gate judges every step a trace holds: a window of the first steps (`advisor
    # analyze`'s default) let a regression after them pass.
    steps_cap = max_steps if max_steps is not None else ALL_STEPS

    request = OutputRequest(markdown_out, junit_out, json_out)
    check_requested((baseline, candidate), request)
    # Last run's verdict goes before any work: a gate killed by any signal (SIGKILL included)
    # leaves no file rather than a stale "pass"; the verdict is written once, at the end.
    clear_outputs(request)
    if _is_job(baseline) or _is_job(candidate):  # several ranks per run: compare the jobs
        if markdown_out or junit_out or json_out or allow:
            # the job verdict has no file renderings and no rule attribution to allow: fail
            # closed, so CI never reads an earlier run's verdict nor a regression let through
            message = ("--markdown, --junit, --json and --allow are not available when "
                       "comparing jobs (folders or globs of rank traces)")
            _fail_closed(message, request, github_annotations)
            raise AnalysisError(message)
        if pid is not None:
            message = ("--pid picks one process of one trace; a job gate compares every rank "
                       "(gate that rank's traces alone to pick a process)")
            _fail_closed(message, request, github_annotations)
            raise AnalysisError(message)
        try:
            return _job_gate(baseline, candidate, threshold / 100,
                             LoadOptions(step_pattern=step_pattern, max_steps=steps_cap),
                             github_annotations)
        except AdvisorError as e:
            if github_annotations and not str(e).startswith("gate inconclusive"):
                from advisor.gate.render.github import render_error_annotation

                click.echo(render_error_annotation(str(e)), nl=False)
            raise
    from advisor.engine.registry import load_rules, select
    from advisor.gate.compare import Policy, gate
    from advisor.gate.outputs import write_outputs
    from advisor.gate.render.github import render_annotations
    from advisor.gate.render.text import render_text

    try:
        allowed = select(load_rules(), list(allow)) if allow else []
        policy = Policy(threshold=threshold / 100,
                        allow=frozenset(k for r in allowed for k in (r.name, r.code)),
                        step_times=step_times)
        from advisor.config import RuleSettings

        result = gate(str(baseline), str(candidate), policy,
                      LoadOptions(step_pattern=step_pattern, pid=pid, max_steps=steps_cap),
                      RuleSettings() if isolated else None)
        write_outputs(result, request)
    except AdvisorError as e:
        _fail_closed(str(e), request, github_annotations)
        raise
    except BaseException:  # a bug or an interrupt: CI must not read last run's "pass"
        _fail_closed("advisor gate failed before a verdict (internal error or interrupted)",
                     request, github_annotations)
        raise
    click.echo(render_text(result), nl=False)
    if github_annotations:
        click.echo(render_annotations(result), nl=False)
    if result.status == "inconclusive":
        raise AnalysisError("gate inconclusive: " + "; ".join(result.inconclusive))
    return int(result.exit_code)


def _fail_closed(message: str, request, github_annotations: bool) -> None:
    """Replace every requested output with an "error" verdict, and say so on stdout."""
    from advisor.errors import OutputError
    from advisor.gate.outputs import write_error_outputs
    from advisor.gate.render.github import render_error_annotation

    with contextlib.suppress(OutputError):  # the original error is the one to report
        write_error_outputs(message, request)
    if github_annotations:
        click.echo(render_error_annotation(message), nl=False)
