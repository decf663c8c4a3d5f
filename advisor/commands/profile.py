"""`advisor profile [OPTIONS] SCRIPT [ARGS]...`: run a training script, record and diagnose it.

Everything that needs torch lives in `advisor.capture` and is imported only when this command
runs, so `advisor analyze` and the rest of the CLI never import torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from advisor.capture.nsys import DEFAULT_TRACE
from advisor.commands.analyze import rule_options

if TYPE_CHECKING:
    from advisor.capture.trial import TrialOptions


@click.command(
    "profile",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.option("--wait", default=None, type=click.IntRange(min=0),
              help="Steps to run before recording. Default: until the step time has settled "
                   "(compilation, autotuning, allocator growth over).")
@click.option("--window-at", "window_at", default=None, metavar="STEP|TIME",
              help="Start recording at this step (like --wait) or this long after the start "
                   "(90s, 5m, 1.5h): for jobs whose interesting part comes later.")
@click.option("--then", "then", type=click.Choice(["continue", "stop"]), default=None,
              help="After the window: 'continue' trains on and analyses beside the job "
                   "(default without a terminal, and in CI); 'stop' ends the job cleanly once "
                   "the window and 20 unprofiled steps are timed (default at a terminal).")
@click.option("--steps", default=10, show_default=True, type=click.IntRange(min=1),
              help="Steps to record; then profiling stops and the job runs on at full speed.")
@click.option("--out", "out", default=Path("advisor-out"), show_default=True,
              type=click.Path(file_okay=False, path_type=Path),
              help="Directory for traces (trace_rank<R>.json.gz) and per-rank analyses.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the JSON result here (rank R>0 of a multi-process job: NAME.rankR.json).")
@click.option("--html", "html_out", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the HTML report here.")
@click.option("--nsys", is_flag=True,
              help="Record the window with Nsight Systems (nsys on PATH) instead of torch.profiler.")
@click.option("--nsys-trace", default=DEFAULT_TRACE, show_default=True,
              metavar="APIS", help="What nsys traces (its -t), with --nsys.")
@click.option("--nsys-option", "nsys_options", multiple=True, metavar="OPTION",
              help="One more `nsys profile` option, with --nsys (repeatable; write it with '=', "
                   "as --nsys-option=--pytorch=autograd-nvtx).")
@click.option("--stacks/--no-stacks", default=None,
              help="Record Python call stacks in the window, so findings name your source lines "
                   "(default: on with torch.profiler, whose with_stack cost is removed from the "
                   "estimates; off with --nsys, where advisor samples the stacks itself at a cost "
                   "its estimates do not remove yet: docs/profile.md, Source lines under --nsys).")
@rule_options
@click.option("--show-fixes", is_flag=True, help="Show each finding's fix code on the console.")
@click.option("--quiet", "-q", is_flag=True,
              help="No progress display and no console summary (progress shows only on a terminal).")
@click.option("-m", "module", is_flag=True, help="SCRIPT is a module name, as in `python -m`.")
@click.option("--try", "try_", default=None, is_flag=False, flag_value="", metavar="[FIX,...]",
              help="After the analysis, run the script again with each fix that is a knob "
                   "(DataLoader workers, torch.compile, bf16, TF32, ...) turned on by advisor, "
                   "interleaved with plain runs, and report the measured speedup beside the "
                   "estimate. FIX: rule names/codes or knobs (tf32, loader:num_workers=8); "
                   "none: every knob fix found. Implies --then stop.")
@click.option("--try-runs", default=2, show_default=True, type=click.IntRange(min=1),
              help="Rounds of trials (plain, each fix) with --try.")
@click.option("--try-steps", default=50, show_default=True, type=click.IntRange(min=3),
              help="Settled steps timed per trial with --try.")
@click.option("--try-time", default=60.0, show_default=True, type=click.FloatRange(min=1),
              help="Or at most this many seconds of settled steps per trial (--try).")
@click.option("--nsys-child", is_flag=True, hidden=True)
@click.argument("script", required=False)
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
def command(wait: int | None, window_at: str | None, then: str | None, steps: int, out: Path,
            json_out: Path | None, html_out: Path | None,
            nsys: bool, nsys_trace: str, nsys_options: tuple[str, ...], stacks: bool | None,
            select: tuple[str, ...], ignore: tuple[str, ...],
            rule_option: tuple[str, ...], isolated: bool, show_fixes: bool, quiet: bool,
            module: bool, try_: str | None, try_runs: int, try_steps: int, try_time: float,
            nsys_child: bool, script: str | None, script_args: tuple[str, ...]) -> int:
    """Run SCRIPT as `python SCRIPT ARGS` would, find its training steps, record a window of
    them and diagnose it like `advisor analyze`.

    The script is not modified: steps are cut at optimizer.step(), phases (data, forward,
    loss, backward, optimizer) come from hooks, all marked with NVTX. Its output, exit code
    and traceback are its own; advisor's summary goes to stderr. `advisor profile torchrun
    ... SCRIPT` profiles every rank.
    """
    from advisor.capture.after_window import default_then, parse_window_at
    from advisor.capture.options import ProfileOptions, stacks_for
    from advisor.capture.runner import profile
    from advisor.capture.script import Target
    from advisor.commands.analyze import settings_from_cli
    from advisor.config import resolve
    from advisor.engine.registry import load_rules
    from advisor.errors import CaptureError

    trial, script, script_args = _trial(try_, try_runs, try_steps, try_time, script, script_args)
    if script is None:
        raise CaptureError("missing SCRIPT: advisor profile [OPTIONS] SCRIPT [ARGS]...")
    if trial is not None:
        if then == "continue":
            raise CaptureError("--try runs the script again once the analysis is done: it "
                               "needs --then stop (its default), not --then continue")
        then = "stop"
    # A mistake in the rule settings is reported now, not after the training script has run.
    resolve(load_rules(), settings_from_cli(select, ignore, rule_option, isolated))
    window_at_s = None
    if window_at is not None:
        if wait is not None:
            raise CaptureError("--wait and --window-at both say where the window starts; "
                               "give one")
        wait, window_at_s = parse_window_at(window_at)
    if then is None:
        then = "continue" if nsys_child else default_then()
    opts = ProfileOptions(wait=wait, window_at_s=window_at_s, then=then, steps=steps, out=out,
                          json_out=json_out, html_out=html_out,
                          nsys=nsys, quiet=quiet, nsys_child=nsys_child, select=select,
                          ignore=ignore, rule_option=rule_option, isolated=isolated,
                          show_fixes=show_fixes,
                          stacks=stacks_for(stacks, nsys or nsys_child),
                          nsys_trace=nsys_trace, nsys_options=nsys_options, trial=trial)
    return profile(opts, Target(script, module=module), list(script_args))


def _trial(value: str | None, runs: int, steps: int, seconds: float, script: str | None,
           script_args: tuple[str, ...]) -> tuple[TrialOptions | None, str | None, tuple[str, ...]]:
    """``--try [FIX,...]`` as `advisor.capture.trial.TrialOptions` (None without ``--try``).

    ``--try`` takes an optional value, so ``--try train.py ARGS`` reads the script as its
    value: an existing path there is the script, and the arguments shift back into place."""
    if value is None:
        return None, script, script_args
    import os

    from advisor.capture.trial import TrialOptions, parse_names

    if value and os.path.exists(value):
        script_args = (script, *script_args) if script is not None else script_args
        script, value = value, ""
    names = parse_names(value) if value else ()
    return TrialOptions(names, runs, steps, seconds), script, script_args
