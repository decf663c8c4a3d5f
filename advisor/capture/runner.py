"""`advisor profile`: run the script with the session installed, then analyse what it recorded."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from advisor.capture.nsys import DEFAULT_TRACE
from advisor.capture.script import SIGINT_EXIT, SIGTERM_EXIT, Target
from advisor.errors import AdvisorError, CaptureError

STATUS_NAME = "capture_rank{rank}.json"


@dataclass
class ProfileOptions:
    wait: int | None = None  # None: start recording once the step time has settled
    steps: int = 10
    out: Path = Path("advisor-out")
    json_out: Path | None = None
    html_out: Path | None = None
    nsys: bool = False
    quiet: bool = False
    nsys_child: bool = False  # internal: running under `nsys profile` started by the parent
    extra_notes: list[str] = field(default_factory=list)
    select: tuple[str, ...] = ()  # rule selection and options, as `advisor analyze` takes them
    ignore: tuple[str, ...] = ()
    rule_option: tuple[str, ...] = ()
    isolated: bool = False
    show_fixes: bool = False
    stacks: bool = True  # torch.profiler records Python stacks in the window (source lines)
    nsys_trace: str = DEFAULT_TRACE  # nsys -t (with --nsys)
    source_root: Path | None = None  # the script's directory: where reports read its lines
    window_at_s: float | None = None  # --window-at TIME: start recording then
    then: str = "continue"  # after the window: "continue" (analysis beside the job) or "stop"
    # --try: the fixes to try after the analysis (`advisor.capture.trial.TrialOptions`), and
    # the script with its arguments, to run again
    trial: Any = None
    trial_target: tuple[Target, list[str]] | None = None
    trial_cwd: str | None = None  # where the script started: trials start there too (a script
    # may os.chdir, as Hydra's do, and its relative paths are the profiled run's)

    def cli_args(self) -> list[str]:
        """These options as `advisor profile` arguments (for the processes we start)."""
        args = ["--wait", str(self.wait)] if self.wait is not None else []
        if self.window_at_s is not None:
            args += ["--window-at", f"{self.window_at_s:g}s"]
        args += ["--steps", str(self.steps), "--out", str(self.out), "--then", self.then]
        if self.json_out:
            args += ["--json", str(self.json_out)]
        if self.html_out:
            args += ["--html", str(self.html_out)]
        if self.nsys:
            args += ["--nsys", "--nsys-trace", self.nsys_trace]
        if self.quiet:
            args.append("--quiet")
        for flag, values in (("--select", self.select), ("--ignore", self.ignore),
                             ("--rule-option", self.rule_option)):
            for value in values:
                args += [flag, value]
        if self.isolated:
            args.append("--isolated")
        if self.show_fixes:
            args.append("--show-fixes")
        if not self.stacks:
            args.append("--no-stacks")
        return args


@dataclass(frozen=True)
class Rank:
    rank: int = 0
    world: int = 1

    @property
    def tag(self) -> str:
        return f"rank{self.rank}"

    @property
    def prints(self) -> bool:
        """Only rank 0 of a multi-process job talks on the console."""
        return self.rank == 0


_RANK_VARS = (("RANK", "WORLD_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
              ("PMI_RANK", "PMI_SIZE"), ("SLURM_PROCID", "SLURM_NTASKS"))


def detect_rank(env: Mapping[str, str] | None = None) -> Rank:
    """This process's rank from the launcher's environment (torchrun, Open MPI, PMI, Slurm)."""
    env = os.environ if env is None else env
    for rank_var, size_var in _RANK_VARS:
        if rank_var in env:
            try:
                return Rank(int(env[rank_var]), int(env.get(size_var, "1") or 1))
            except ValueError:
                continue
    return Rank()


def import_torch() -> None:
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

    if opts.trial is not None and launch.is_torchrun(target.name, target.module):
        raise CaptureError("--try does not run multi-process (torchrun) jobs yet: profile "
                           "one process, or try the fixes by hand")
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
    recorder = CudaProfilerRecorder() if opts.nsys_child else KinetoRecorder(trace, stacks=opts.stacks)
    talk = not opts.quiet and rank.prints
    shown = _progress(opts, rank)
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
        return _nothing_recorded(opts, state, code, recorder.error)
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


def _progress(opts: ProfileOptions, rank: Rank):
    """The progress display: rank 0 only, on a terminal, not with --quiet."""
    from advisor.report.progress import Progress

    return Progress.on_stderr(opts.quiet) if rank.prints else Progress(False)


def write_status(out: Path, rank: Rank, code: int | None, state) -> None:
    """The nsys child's state for the parent (``exit_code`` None: the job still runs)."""
    from advisor.capture.background import write_json_atomic

    status = {"exit_code": code, "rank": rank.rank, "world": rank.world, **asdict(state)}
    write_json_atomic(out / STATUS_NAME.format(rank=rank.rank), status)


def why_nothing(opts: ProfileOptions, complete: list[int], explicit: bool, optimizer_steps: int,
                skipped: str | None, error: str | None, code: int = 0) -> str:
    if error or skipped:
        return f"nothing was recorded: {error or skipped}"
    if code in (SIGINT_EXIT, SIGTERM_EXIT) and (complete or optimizer_steps or explicit):
        from advisor.capture.after_window import interrupted_before

        return interrupted_before(opts, complete, code)
    if not complete and not optimizer_steps and not explicit:
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


def _nothing_recorded(opts: ProfileOptions, state, code: int, error: str | None) -> int:
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
        progress = _progress(opts, rank)
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


def _try(analysis, opts: ProfileOptions, rank: Rank, talk: bool) -> None:
    """``--try``: run the trials (`advisor.capture.trial`), then write every report again with
    the measurements beside the estimates; the console gets the trials' section only."""
    from rich.console import Console

    from advisor.capture.trial import run_after_analysis
    from advisor.report.console import render_tried

    tried = run_after_analysis(analysis, opts, talk)
    render(analysis, opts, rank, False, tried=tried)
    if talk:
        render_tried(tried, Console(stderr=True, highlight=False))


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
