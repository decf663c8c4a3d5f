"""`advisor profile`: run the script with the session installed, then analyse what it recorded.

The run's order, top to bottom: `profile` picks how the job runs (torchrun, nsys, here);
`run_here` installs the session and runs the script; `_after_job` records the state and hands
over to the analysis (beside the job: `advisor.capture.after_window`, else here:
`advisor.capture.reporting`). The options and the rank are `advisor.capture.options`'.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from advisor.capture.options import ProfileOptions, Rank, detect_rank, write_status
from advisor.capture.reporting import nothing_recorded, progress_display, report, why_nothing
from advisor.capture.script import SIGTERM_EXIT, Target
from advisor.errors import CaptureError


def import_torch() -> None:
    if os.environ.get("ADVISOR_GC_FREEZE") == "1":  # issue 32 experiment, see wave5_overhead.sh
        import gc

        gc.freeze()
    try:
        import torch  # noqa: F401
    except ImportError as e:
        raise CaptureError("advisor profile needs PyTorch in this Python environment "
                           f"({sys.executable}): pip install 'h100-advisor[profile]'") from e


def check_outputs(opts: ProfileOptions, inputs: list[Path] | None = None) -> None:
    """Fail before the job runs when a report could not be written anyway."""
    if opts.html_out is not None:
        import importlib.util

        if importlib.util.find_spec("advisor.report.html_report") is None:
            raise CaptureError("--html: this build of advisor has no HTML report yet; use --json")
    if (opts.wait is not None and opts.wait < 0) or opts.steps < 1:
        raise CaptureError("--wait must be >= 0 and --steps >= 1")
    try:
        os.makedirs(opts.out, exist_ok=True)
    except OSError as e:
        raise CaptureError(f"--out {opts.out}: cannot create ({e.strerror})") from e
    check_output_paths(opts, inputs or [])
    pin_paths(opts)


def pin_paths(opts: ProfileOptions) -> None:
    """Resolve advisor's output paths once, before the script runs: a script that calls
    ``os.chdir``, or swaps a link for ``--out``, then moves none of advisor's files (nor the
    processes advisor starts later, which are told these paths)."""
    opts.out = Path(os.path.realpath(opts.out))
    for name in ("json_out", "html_out"):
        path = getattr(opts, name)
        if path is not None and str(path) != "-":
            setattr(opts, name, Path(os.path.realpath(path.parent)) / path.name)


def check_output_paths(opts: ProfileOptions, inputs: list[Path]) -> None:
    """Reports that would overwrite the script, be a directory or be unwritable fail now, not
    after the whole job has run (`advisor.output_paths`)."""
    from advisor.output_paths import check_outputs

    check_outputs(inputs, {"--json": opts.json_out, "--html": opts.html_out})


def profile(opts: ProfileOptions, target: Target, args: list[str]) -> int:
    """Run the target under advisor; the return value is the script's exit code."""
    from advisor.capture import launch

    if launch.is_torchrun(target.name, target.module):
        import_torch()
        check_outputs(opts)
        return launch.torchrun(opts, args)
    target.check()
    import_torch()
    check_outputs(opts, [Path(target.origin())] if target.origin() else [])
    opts.trial_target = (target, list(args))
    opts.trial_cwd = os.getcwd()
    rank = detect_rank()
    if opts.nsys and not opts.nsys_child:
        from advisor.capture import nsys

        return nsys.profile(opts, target, args, rank)
    return run_here(opts, target, args, rank)


def run_here(opts: ProfileOptions, target: Target, args: list[str], rank: Rank) -> int:
    from advisor.capture import after_window, jobproc, script, session
    from advisor.capture.capture_state import WindowPlan
    from advisor.capture.window import CudaProfilerRecorder, KinetoRecorder

    trace = opts.out / f"trace_{rank.tag}.json.gz"
    if target.origin():
        opts.source_root = Path(target.origin()).resolve().parent
    if opts.nsys_child:  # Python stacks sampled by advisor beside the export (source lines)
        from advisor.capture.pystacks import FILE_NAME as STACKS_FILE

        stacks = opts.out / STACKS_FILE.format(tag=rank.tag) if opts.stacks else None
        recorder = CudaProfilerRecorder(stacks)
    else:
        recorder = KinetoRecorder(trace, stacks=opts.stacks)
    talk = not opts.quiet and rank.prints
    shown = progress_display(opts, rank)
    hand = after_window.Handover(opts, rank, trace)
    plan = WindowPlan(opts.wait, opts.steps, at_seconds=opts.window_at_s,
                      stop_after=opts.then == "stop")
    sess = session.Session(plan, recorder,
                           progress=session.progress_to_stderr if talk else None,
                           status=shown.note, on_window_closed=hand.window_closed,
                           on_measured=hand.measured)
    sess.install()
    session.activate(sess)
    jobproc.watch_forks()
    try:
        with jobproc.sigterm_default(lambda: _terminated(opts, rank, sess, recorder, hand)):
            code = script.run(target, args)
    finally:
        if not jobproc.in_forked_child():
            try:
                sess.finish()
            finally:
                session.activate(None)
                jobproc.job_ended()
    if jobproc.in_forked_child():  # the script forked and the child left the script: its own
        # exit code, and none of advisor's end-of-job work (`advisor.capture.jobproc`)
        return jobproc.child_exits(code)
    jobproc.streams_left_closed()
    try:
        return _after_job(opts, rank, sess, recorder, hand, trace, code)
    except OSError as e:  # the script removed or replaced advisor's files: its exit code stands
        print(f"advisor: error: cannot write advisor's files in {opts.out} ({e.strerror or e}); "
              "no report", file=sys.stderr)
        return code


def _after_job(opts: ProfileOptions, rank: Rank, sess, recorder, hand, trace: Path,
               code: int) -> int:
    """The script has ended: record its state, then analyse (or wait for the analysis beside
    the job) and return the script's exit code."""
    from advisor.capture import after_window

    state = sess.state
    if state.stopped_after_window:
        code = after_window.stopped(code)
    # The session's record (steps, host activities, cores, DataLoader settings, frameworks)
    # beside the trace: the nsys parent reads it; a later `advisor analyze` may too.
    write_status(opts.out, rank, code, state)
    if opts.nsys_child:
        return code
    if not recorder.written:
        return nothing_recorded(opts, state, code, recorder.error)
    if hand.background is not None:
        done = hand.job_ended(state, code)
        if done is not None:
            return done
    return report(opts, rank, trace, code, state.recorded, state.complete, state)


def _terminated(opts: ProfileOptions, rank: Rank, sess, recorder, hand) -> None:
    """SIGTERM, from its handler, just before the process is killed by it: close the window
    (its trace is written), record the state and hand the step clock to the analysis beside
    the job (started now if the window closed only now), which writes the reports."""
    from advisor.capture.background import BackgroundAnalysis

    handing_over = sess.handing_over
    sess.terminate()
    state = sess.state
    write_status(opts.out, rank, SIGTERM_EXIT, state)
    if opts.nsys_child or handing_over:  # interrupted mid-handover: not re-entered
        return
    if not (recorder.written and state.recorded):
        if recorder.written:
            msg = ("the job was terminated (SIGTERM) in the recorded window before any of its "
                   "steps had ended: there is no report")
        else:
            msg = why_nothing(opts, state.complete, state.explicit, state.optimizer_steps,
                              state.skipped_reason, recorder.error, SIGTERM_EXIT)
        if rank.prints:
            print(f"advisor: {msg}", file=sys.stderr)
        return
    bg = hand.background
    if bg is None:
        bg = hand.background = BackgroundAnalysis(opts, rank, recorder.trace_path)
    if not bg.started:
        bg.start(state)
    bg.steps(state, final=True)
    if rank.prints:
        print(f"advisor: the job was terminated (SIGTERM); the analysis beside it writes its "
              f"reports to {opts.out}", file=sys.stderr)
