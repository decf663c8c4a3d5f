"""The reports of `advisor profile`: the recorded window analysed on its measured baseline
(`analyze_recorded`), rendered like `advisor analyze` (`render`), with ``--try``'s measurements
beside the estimates; and what is said when nothing was recorded (`why_nothing`)."""

from __future__ import annotations

import sys
from pathlib import Path

from advisor.capture.options import ProfileOptions, Rank
from advisor.capture.script import SIGINT_EXIT, SIGTERM_EXIT
from advisor.errors import AdvisorError, CaptureError


def progress_display(opts: ProfileOptions, rank: Rank):
    """The progress display: rank 0 only, on a terminal, not with --quiet."""
    from advisor.report.progress import Progress

    return Progress.on_stderr(opts.quiet) if rank.prints else Progress(False)


def why_nothing(opts: ProfileOptions, complete: list[int], explicit: bool, optimizer_steps: int,
                skipped: str | None, error: str | None, code: int = 0) -> str:
    if error or skipped:
        return f"nothing was recorded: {error or skipped}"
    if code in (SIGINT_EXIT, SIGTERM_EXIT) and (complete or optimizer_steps or explicit):
        from advisor.capture.after_window import interrupted_before

        return interrupted_before(opts, complete, code)
    if not complete and not optimizer_steps and not explicit:
        if code != 0:  # it failed before training: its own error above says why, not us
            return (f"the script exited with {code} before its first training step (its error "
                    "is above): nothing was recorded")
        return ("no training steps found: the script never called optimizer.step() of a "
                "torch.optim optimizer; mark its loop with advisor.capture.step()")
    n = len(complete)
    if opts.wait is None:
        from advisor.capture.settle import SETTLE_BLOCK

        return (f"the script ran {n} complete step{'s' if n != 1 else ''}, and the window "
                f"starts once the step time has settled (at least {2 * SETTLE_BLOCK + 1} "
                "steps); pin it with --wait N or run more steps")
    return (f"the script ran {n} complete step{'s' if n != 1 else ''}, fewer than the "
            f"{opts.wait + 1} needed to reach the recorded window (--wait {opts.wait}); "
            "lower --wait or run more steps")


def nothing_recorded(opts: ProfileOptions, state, code: int, error: str | None) -> int:
    msg = why_nothing(opts, state.complete, state.explicit, state.optimizer_steps,
                      state.skipped_reason, error, code)
    if code != 0:
        print(f"advisor: {msg}", file=sys.stderr)
        return code
    raise CaptureError(msg)


def report(opts: ProfileOptions, rank: Rank, trace: Path, code: int, recorded: list[int],
           complete: list[int], state=None) -> int:
    """Analyse the recorded steps and render them like `advisor analyze`; ``state`` (the
    session's state, or the nsys child's status) adds the measured steps and the whole run."""
    talk = not opts.quiet and rank.prints
    if not recorded:
        msg = "the recorded window holds no complete step"
        if code != 0:
            print(f"advisor: {msg} (the script exited with {code})", file=sys.stderr)
            return code
        raise CaptureError(msg)
    try:
        progress = progress_display(opts, rank)
        analysis = analyze_recorded(trace, recorded, opts, progress, state)
        render(analysis, opts, rank, talk, progress)
        if opts.trial is not None and opts.trial_target is not None and code == 0:
            _try(analysis, opts, rank, talk)
    except AdvisorError as e:
        if code == 0:
            raise
        from advisor.safe_text import plain

        print(f"advisor: error: {plain(e)}", file=sys.stderr)
        return code
    if talk:
        print(f"advisor: trace {trace}; {len(recorded)} steps recorded"
              + (f"; the script exited with {code}" if code else ""), file=sys.stderr)
    return code


def _try(analysis, opts: ProfileOptions, rank: Rank, talk: bool,
         launcher: list[str] | None = None) -> None:
    """``--try``: run the trials (`advisor.capture.trial`), then write every report again with
    the measurements beside the estimates; the console gets the trials' section only.
    ``launcher``: torchrun and its options, for the trials of a multi-process job."""
    from rich.console import Console

    from advisor.capture.trial import run_after_analysis
    from advisor.report.console import render_tried

    tried = run_after_analysis(analysis, opts, talk, launcher)
    render(analysis, opts, rank, False, tried=tried)
    if talk:
        render_tried(tried, Console(stderr=True, highlight=False))


def try_after_job(opts: ProfileOptions, job) -> None:
    """``--try`` on a torchrun job (`advisor.capture.launch.Launch`), once it has ended: the
    trials run under the same launcher line, and the fixes tried are those of rank 0's
    analysis, the summary the user read. The analysis is made again here from rank 0's trace
    and state (the worker that made it has exited), then rank 0's reports are written again
    with the measurements beside the estimates."""
    import json
    import os

    from advisor.capture.options import STATUS_NAME
    from advisor.capture.script import Target

    talk = not opts.quiet
    try:
        status = json.loads((opts.out / STATUS_NAME.format(rank=0)).read_text())
    except (OSError, ValueError):
        status = None
    traces = [p for p in (opts.out / "trace_rank0.json.gz", opts.out / "nsys_rank0.sqlite")
              if p.exists()]
    if not status or not status.get("recorded") or not traces:
        print("advisor: --try: no trials: rank 0 recorded no complete step to analyse",
              file=sys.stderr)
        return
    rank = Rank(0, int(status.get("world") or 1))
    target = Target(job.script, module=job.module)
    if target.origin():
        opts.source_root = Path(target.origin()).resolve().parent
    opts.trial_target, opts.trial_cwd = (target, list(job.args)), os.getcwd()
    try:
        analysis = analyze_recorded(traces[0], status["recorded"], opts, None, status)
        _try(analysis, opts, rank, talk, launcher=job.launcher())
    except AdvisorError as e:  # the job's exit code stands; say why there are no trials
        from advisor.safe_text import plain

        print(f"advisor: --try: no trials: {plain(e)}", file=sys.stderr)


def recorded_inputs(trace: Path, recorded: list[int], opts: ProfileOptions | None = None,
                    progress=None, facts=None):
    """The inputs of an analysis of the window, with the replayed baseline: the trace read
    keeping only steps that ran to their end in the window (a load option:
    `advisor.ingest.base.LoadOptions.recorded_steps`); ``facts``: what the session recorded
    about the host and the script (`advisor.engine.host`)."""
    from advisor.analysis import AnalysisInput
    from advisor.config import settings_from_flags
    from advisor.ingest.base import LoadOptions, load_trace
    from advisor.report.progress import Progress

    opts = opts or ProfileOptions()
    settings = settings_from_flags(opts.select, opts.ignore, opts.rule_option, opts.isolated)
    progress = progress or Progress(False)
    load = LoadOptions(max_steps=max(LoadOptions.max_steps, len(recorded)),
                       recorded_steps=frozenset(recorded))
    with progress.stage(f"reading {trace.name}") as stage:
        graph = load_trace(trace, load)
        stage.done(f"read {trace.name}: {len(graph.gpu_ops):,} GPU ops, "
                   f"{len(graph.steps)} steps found")
    roots = tuple(r for r in (opts.source_root, Path.cwd()) if r is not None)
    return AnalysisInput.of(graph, settings, facts, source_roots=roots)


def analyze_recorded(trace: Path, recorded: list[int], opts: ProfileOptions | None = None,
                     progress=None, state=None):
    """The analysis of the window (`recorded_inputs`); ``state``: the session's state (or the
    nsys child's status), whose host facts and measured steps are fixed into the inputs, and
    the calibration chosen against those steps, before the rules run
    (`advisor.capture.baseline`)."""
    from advisor.analysis import analyze_shown
    from advisor.report.progress import Progress

    progress = progress or Progress(False)
    if state is None:
        return analyze_shown(recorded_inputs(trace, recorded, opts, progress), progress)
    from advisor.capture.baseline import measured_inputs
    from advisor.capture.steptimes import StepClock
    from advisor.engine.host import HostFacts

    inputs = recorded_inputs(trace, recorded, opts, progress, HostFacts.from_state(state))
    return analyze_shown(measured_inputs(inputs, StepClock.from_state(state)), progress)


def render(analysis, opts: ProfileOptions, rank: Rank, talk: bool, progress=None,
           tried=None) -> None:
    """Every report of the analysis through `advisor.report.emit`; the script owns stdout, so
    advisor's summary goes to stderr."""
    from advisor.capture.window import rank_suffixed
    from advisor.report.emit import emit

    json_out = rank_suffixed(opts.json_out, rank.rank, rank.world) if opts.json_out else None
    html_out = rank_suffixed(opts.html_out, rank.rank, rank.world) if opts.html_out else None
    emit(analysis, json_out, html_out, quiet=not talk, show_fixes=opts.show_fixes,
         progress=progress, stderr=True, records=[opts.out / f"analysis_{rank.tag}.json"],
         tried=tried)
