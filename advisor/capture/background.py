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

This module is the job's side (it starts the process, writes the files, reads its status);
the process is `advisor.capture.analysis_process`. The analysis reads the trace and runs the
rules once, then writes the console summary, the JSON
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
from typing import Any

from advisor.output_paths import replace_file

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
        while process_alive(job_pid) and not (read_json(steps_path) or {}).get("final"):
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


def put_status(path: Path, status: dict) -> None:
    """The analysis's status for the job; a job that removed or replaced ``--out`` gets none
    (the analysis goes on quietly: there is nowhere to write its reports either)."""
    with contextlib.suppress(OSError):
        write_json_atomic(path, status)


def read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def state_dict(state: Any) -> dict:
    return asdict(state) if is_dataclass(state) else dict(state)


def process_alive(pid: int) -> bool:
    """Whether ``pid`` still runs. A process that has exited but that its parent has not reaped
    yet (a zombie) answers ``kill(pid, 0)`` like a live one: the analysis beside an interrupted
    job then waited for it forever where the job's parent reaps it only once the analysis has
    closed the output they share (`subprocess.communicate`, CI under load); on Linux its state
    in ``/proc`` says it is gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # no /proc (macOS): kill's answer stands
        return True
    fields = stat.rpartition(")")[2].split()
    return not fields or fields[0] not in ("Z", "X")


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
            [sys.executable, "-m", "advisor.capture.analysis_process", str(self.handoff_path)],
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
        return read_json(self.status_path) or {}

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
