"""The analysis beside the running job: reports as soon as the recorded window closes.

A real training job runs for hours after its window; waiting for it to end before analysing a
window that closed in the first minute would make `advisor profile` useless on real jobs. So
when the window's trace is written, the job starts this module in a separate process (its own
session, so a Ctrl-C at the terminal does not reach it; ``nice`` 10, so the training loop keeps
its cores), and goes on with its next step. The two talk only through files in ``--out``:

* ``handoff_rank<R>.json`` (job -> analysis): the trace, the steps recorded, the options, the
  job's state when the window closed, the job's pid.
* ``steps_rank<R>.json`` (job -> analysis): the session's step clock, written once
  `STEPS_MEASURED_AFTER` unprofiled steps after the window (the measured step exists from
  then on) and again when the job ends (``final``: the whole run).
* ``background_rank<R>.json`` (analysis -> job): its own status (running, reported, done,
  failed), when it started and wrote its reports, and the error if any.

The analysis reads the trace and runs the rules once, then writes the console summary, the JSON
and the HTML as soon as the measured steps are in (or the job has ended), and stays (sleeping)
until the job ends, when it rewrites the reports with the whole run's account without reading
the trace again. If the job dies without a word (SIGKILL, ``os._exit``), the reports written at
the window's close stand. In a multi-process job the rank whose analysis completes the set runs
the job view (`advisor.capture.launch.job_report`).

Polling a file once a second was chosen over a pipe or a socket: the job side then costs one
small file write at two moments, never a blocking call in the training loop, and the files say
after the fact what happened.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.output_paths import replace_file

if TYPE_CHECKING:
    from advisor.analysis import Analysis, AnalysisInput

HANDOFF = "handoff_{tag}.json"
STEPS = "steps_{tag}.json"
STATUS = "background_{tag}.json"
JOB_CLAIM = "job.claimed"
NICE = 10
ONE_THREAD = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
              "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")
"""The analysis runs on one thread: numerical libraries would otherwise start one per core
beside the job's own (numpy's BLAS at import), and they spin while they wait."""


def step_aside() -> None:
    """Make this process yield to the job: nice 10 and, on Linux, ``SCHED_IDLE``, which runs it
    only on a CPU nothing else wants. nice alone still takes about a tenth of a CPU it shares
    with the job's loop thread (CFS weights 110 against 1024); a launch-bound loop pays that
    on every step it shares (issue 32: +18% on nanoGPT's steps after the window)."""
    with contextlib.suppress(OSError):
        os.nice(NICE)
    if hasattr(os, "sched_setscheduler") and hasattr(os, "SCHED_IDLE"):
        with contextlib.suppress(OSError):
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))


def step_back_when_done(job_pid: int, steps_path: Path) -> None:
    """Once the job has ended, leave ``SCHED_IDLE`` (for nice 10): the job's process waits for
    this analysis then, and on a machine other work keeps busy an idle-class process might
    never run. A daemon thread polls; an unprivileged process may not be allowed the switch
    (RLIMIT_NICE), and then stays as it is."""
    if not (hasattr(os, "sched_setscheduler") and hasattr(os, "SCHED_IDLE")):
        return
    main = threading.get_native_id()

    def watch() -> None:
        while _alive(job_pid) and not (_read_json(steps_path) or {}).get("final"):
            time.sleep(POLL_S)
        with contextlib.suppress(OSError):
            os.sched_setscheduler(main, os.SCHED_OTHER, os.sched_param(0))

    threading.Thread(target=watch, daemon=True, name="advisor-step-back").start()
POLL_S = 1.0
WAIT_FOR_MEASURED_S = 120.0
"""How long the analysis, once done, waits for the measured steps before writing the reports
with what it has (the job may run its first steps after the window very slowly)."""


def write_json_atomic(path: Path, data: Any) -> None:
    """Readers (the job, the analysis beside it) never see half a file (`replace_file`)."""
    replace_file(path, json.dumps(data))


def _put_status(path: Path, status: dict) -> None:
    """The analysis's status for the job; a job that removed or replaced ``--out`` gets none
    (the analysis goes on quietly: there is nowhere to write its reports either)."""
    with contextlib.suppress(OSError):
        write_json_atomic(path, status)


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def state_dict(state: Any) -> dict:
    return asdict(state) if is_dataclass(state) else dict(state)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _has_fd(stream: Any) -> bool:
    try:
        stream.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
        return False
    return True


def _relay(src: Any, dst: Any) -> None:
    for line in src:
        with contextlib.suppress(Exception):
            dst.write(line)
            dst.flush()


class BackgroundAnalysis:
    """The job's side: start the analysis process, feed it the step clock, wait for it."""

    def __init__(self, opts: Any, rank: Any, trace: Path) -> None:
        self.opts, self.rank, self.trace = opts, rank, trace
        tag = rank.tag
        self.handoff_path = opts.out / HANDOFF.format(tag=tag)
        self.steps_path = opts.out / STEPS.format(tag=tag)
        self.status_path = opts.out / STATUS.format(tag=tag)
        self.proc: subprocess.Popen | None = None
        self._relays: list[threading.Thread] = []
        self._seq = 0
        stale_claim = [opts.out / JOB_CLAIM] if rank.rank == 0 else []
        for stale in [*stale_claim,  self.handoff_path, self.steps_path, self.status_path]:
            stale.unlink(missing_ok=True)

    @property
    def started(self) -> bool:
        return self.proc is not None

    def start(self, state: Any) -> None:
        """Hand the window over and start the analysis process (returns at once)."""
        st = state_dict(state)
        o = self.opts
        handoff = {
            "trace": str(self.trace), "recorded": list(st.get("recorded", [])),
            "complete": list(st.get("complete", [])), "state": st, "job_pid": os.getpid(),
            "rank": self.rank.rank, "world": self.rank.world,
            "options": {"out": str(o.out), "json_out": str(o.json_out) if o.json_out else None,
                        "html_out": str(o.html_out) if o.html_out else None,
                        "quiet": o.quiet, "show_fixes": o.show_fixes, "select": list(o.select),
                        "ignore": list(o.ignore), "rule_option": list(o.rule_option),
                        "isolated": o.isolated, "steps": o.steps,
                        # where the reports read the script's lines (source lines)
                        "source_root": str(o.source_root) if o.source_root else None},
        }
        write_json_atomic(self.handoff_path, handoff)
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])  # advisor importable as in the job
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH")
                                    else "")
        env.update(dict.fromkeys(ONE_THREAD, "1"))
        # The summary goes to the job's stderr; only the job view of a multi-process job goes
        # to stdout, where `advisor profile torchrun` has always printed it. Streams without a
        # file descriptor (advisor run in-process, e.g. under click's CliRunner) are relayed.
        relay = {name: stream for name, stream in (("stdout", sys.stdout), ("stderr", sys.stderr))
                 if not _has_fd(stream)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "advisor.capture.background", str(self.handoff_path)],
            stdin=subprocess.DEVNULL, start_new_session=True, env=env, close_fds=True,
            **{name: subprocess.PIPE for name in relay}, text=bool(relay) or None)
        self._relays = [threading.Thread(target=_relay, args=(getattr(self.proc, name), stream),
                                         daemon=True) for name, stream in relay.items()]
        for t in self._relays:
            t.start()

    def steps(self, state: Any, final: bool) -> None:
        """The step clock so far (``final``: the job has ended, this is the whole run)."""
        # unique across writers: under nsys the child and then the parent write this file
        self._seq += 1
        write_json_atomic(self.steps_path, {"seq": f"{os.getpid()}.{self._seq}", "final": final,
                                            "state": state_dict(state)})

    def status(self) -> dict:
        return _read_json(self.status_path) or {}

    def wait(self) -> dict:
        """Wait for the analysis to finish; a Ctrl-C here leaves it running and says where its
        reports will be."""
        if self.proc is None:
            return {}
        try:
            self.proc.wait()
            for t in self._relays:
                t.join(timeout=5)
        except KeyboardInterrupt:
            print(f"advisor: the analysis goes on in the background (pid {self.proc.pid}); its "
                  f"reports will be in {self.opts.out}", file=sys.stderr)
            return {"state": "running", "detached": True}
        st = self.status()
        if st.get("state") == "running":  # it ended without saying so: it crashed
            st = {"state": "crashed", "exit_code": self.proc.returncode}
        return st


# ----- the analysis process ----------------------------------------------------------------------


class _Passes:
    """The rules' passes over the window, one per calibration: each report puts the newest
    measured steps into the inputs (`advisor.capture.baseline.measured_inputs`) before
    analysing, and only a calibration not seen before (fitted to those steps) runs the rules
    again; the pass is a function of the inputs, so one already run is reused as is."""

    def __init__(self, inputs: AnalysisInput, progress: Any) -> None:
        from advisor.analysis import rule_pass_shown

        self.inputs = inputs  # the replayed baseline: the steps are measured into a copy
        # the calibrated costs' pass runs now, while the job measures its steps after the window
        self.by_calibration = {inputs.calibration: rule_pass_shown(inputs, progress)}

    def analysis(self, state: dict) -> Analysis:
        from advisor.analysis import analyze_input, rule_pass
        from advisor.capture.baseline import measured_inputs
        from advisor.capture.steptimes import StepClock

        inputs = measured_inputs(self.inputs, StepClock.from_state(state))
        ruled = self.by_calibration.get(inputs.calibration)
        if ruled is None:
            ruled = self.by_calibration[inputs.calibration] = rule_pass(inputs)
        return analyze_input(inputs, ruled)


def _progress(talk: bool):
    """Each stage's closing line on a terminal (``✓ read ...``, ``✓ rules: ...``), no spinner:
    a spinner redrawn from beside the job would write over the job's own output."""
    from contextlib import contextmanager

    from rich.markup import escape

    from advisor.report.progress import Progress, Stage

    class StageLines(Progress):
        @contextmanager
        def stage(self, doing: str):
            stage, start = Stage(doing), time.perf_counter()
            yield stage
            if self._console is not None:
                self._console.print(f"[green]✓[/] {escape(stage.result or doing)} "
                                    f"[dim]({time.perf_counter() - start:.1f} s)[/]",
                                    markup=True, highlight=False)

    return StageLines(talk and sys.stderr.isatty())


def _options(h: dict):
    from advisor.capture.runner import ProfileOptions

    o = h["options"]
    return ProfileOptions(
        out=Path(o["out"]), json_out=Path(o["json_out"]) if o["json_out"] else None,
        html_out=Path(o["html_out"]) if o["html_out"] else None, quiet=o["quiet"],
        show_fixes=o["show_fixes"], select=tuple(o["select"]), ignore=tuple(o["ignore"]),
        rule_option=tuple(o["rule_option"]), isolated=o["isolated"], steps=o["steps"],
        source_root=Path(o["source_root"]) if o.get("source_root") else None)


def _render(passes: _Passes, state: dict, opts, rank, talk: bool) -> int | None:
    from advisor.capture.runner import render

    analysis = passes.analysis(state)
    render(analysis, opts, rank, talk)
    return analysis.measured.count if analysis.measured is not None else None


def run_analysis(handoff_path: Path) -> int:
    """The analysis process: analyse once, report, keep the reports current until the job ends."""
    from advisor.capture.runner import Rank
    from advisor.errors import AdvisorError

    step_aside()
    h = _read_json(handoff_path)
    if h is None:  # the job removed or replaced --out before this process started: no report
        return 1
    opts, rank = _options(h), Rank(h["rank"], h["world"])
    tag = rank.tag
    steps_path = opts.out / STEPS.format(tag=tag)
    step_back_when_done(int(h["job_pid"]), steps_path)
    status_path = opts.out / STATUS.format(tag=tag)
    status: dict[str, Any] = {"pid": os.getpid(), "state": "running", "started": time.time(),
                              "trace": h["trace"]}
    _put_status(status_path, status)
    talk = not opts.quiet and rank.prints
    try:
        return _analyse_and_report(h, opts, rank, status, status_path, steps_path, talk)
    except AdvisorError as e:
        from advisor.safe_text import plain

        status.update(state="failed", error=plain(e), finished=time.time())
    except Exception as e:  # a bug: its traceback on stderr, the job told why there is no report
        import traceback

        traceback.print_exc()
        status.update(state="failed", finished=time.time(),
                      error=f"internal error in the analysis ({type(e).__name__}: {e})")
    _put_status(status_path, status)
    return 1


def _analyse_and_report(h: dict, opts, rank, status: dict, status_path: Path, steps_path: Path,
                        talk: bool) -> int:
    from advisor.capture.runner import recorded_inputs
    from advisor.engine.host import HostFacts

    # what the session recorded about the host and the script (cores, the loader, imported
    # frameworks), as the in-process analysis passes it: without it a rule falls back to its
    # stated assumption ("the host has 8 cores ...") although the job's own figure is known
    facts = HostFacts.from_state(h["state"]) if h.get("state") else None
    progress = _progress(talk)
    passes = _Passes(recorded_inputs(Path(h["trace"]), h["recorded"], opts, progress, facts),
                     progress)
    status["analysed"] = time.time()
    job_pid = int(h["job_pid"])
    seen: str | None = None  # sequence tag of the steps file last applied
    reported = False
    deadline = time.time() + WAIT_FOR_MEASURED_S
    while True:
        steps = _read_json(steps_path) if steps_path.exists() else None
        seq = steps.get("seq") if steps is not None else None
        alive = _alive(job_pid)
        final = bool(steps and steps.get("final"))
        fresh = steps is not None and seq != seen
        if fresh or (not reported and (not alive or time.time() > deadline)):
            state = steps["state"] if steps is not None else h["state"]
            # The summary shows at the first report and again, complete, when the job ends
            # (measured steps and the whole run; a long job's output has buried the first).
            if reported and final and talk:
                print("advisor: the job ended; the report with the whole run:", file=sys.stderr,
                      flush=True)
            measured = _render(passes, state, opts, rank,
                               talk and (not reported or final))
            if reported and talk:
                what = "the whole run" if final else f"{measured or 0} measured steps"
                print(f"advisor: reports updated with {what} ({opts.out})", file=sys.stderr,
                      flush=True)
            seen = seq
            now = time.time()
            status.update(state="done" if final or not alive else "reported",
                          measured_steps=measured, whole_run=final)
            status.setdefault("reported", now)
            status["updated"] = now
            _put_status(status_path, status)
            if not reported and talk:
                print(f"advisor: trace {h['trace']}; {len(h['recorded'])} steps recorded"
                      + ("" if final or not alive else "; reports written while the job runs on"),
                      file=sys.stderr, flush=True)
            if not reported and rank.world > 1:
                _job_view(opts, rank)
            reported = True
        if final or not alive:
            if not final and reported and status["state"] != "done":
                status["state"] = "done"
                _put_status(status_path, status)
            return 0
        time.sleep(POLL_S)


def _job_view(opts, rank) -> None:
    """The rank that completes the set of per-rank reports runs the job view, once."""
    done = 0
    for r in range(rank.world):
        st = _read_json(opts.out / STATUS.format(tag=f"rank{r}")) or {}
        done += st.get("state") in ("reported", "done")
    if done < rank.world:
        return
    try:
        fd = os.open(opts.out / JOB_CLAIM, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    os.close(fd)
    from advisor.capture.launch import job_report

    job_report(opts)


def main(argv: list[str]) -> int:
    for name in ("stdout", "stderr"):  # started after the job closed its own: nowhere to talk
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w"))  # noqa: SIM115 - lives as long as sys's
    if len(argv) != 1:
        print("usage: python -m advisor.capture.background HANDOFF_JSON", file=sys.stderr)
        return 2
    return run_analysis(Path(argv[0]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
