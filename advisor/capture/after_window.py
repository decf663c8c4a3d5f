"""What happens once the recorded window closes: the analysis beside the job, or a clean stop.

``--then continue`` (the default without a terminal: under a scheduler, in CI, behind ``nohup``)
hands the window to `advisor.capture.background` as soon as its trace is written and lets the
job train on unprofiled; the reports appear while it runs and are brought up to date with the
whole run when it ends. ``--then stop`` (the default when stdin and stderr are a terminal and
``CI`` is not set: a person is waiting for the diagnosis) times `STEPS_MEASURED_AFTER`
unprofiled steps after the window, then ends the job between two steps with a
KeyboardInterrupt (`StopAfterWindow`), so the script's own Ctrl-C clean-up runs, and analyses
at once; the exit code is then 0.

Under ``--nsys`` the job runs in a child under Nsight Systems (`advisor.capture.nsys`); the child
writes its state when the window closes and its measured steps later, and the parent, which
waits beside the job anyway, exports and hands over.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from advisor.capture.background import BackgroundAnalysis
from advisor.capture.capture_state import STEPS_MEASURED_AFTER
from advisor.errors import CaptureError

THEN_CHOICES = ("continue", "stop")


def default_then(env: Mapping[str, str] | None = None, stdin: TextIO | None = None,
                 stderr: TextIO | None = None) -> str:
    """``stop`` for a person at a terminal, ``continue`` for CI and batch jobs."""
    env = os.environ if env is None else env
    if env.get("CI", "").lower() not in ("", "0", "false"):
        return "continue"
    stdin = sys.stdin if stdin is None else stdin
    stderr = sys.stderr if stderr is None else stderr
    try:
        interactive = stdin.isatty() and stderr.isatty()
    except (AttributeError, ValueError):  # closed or replaced streams
        interactive = False
    return "stop" if interactive else "continue"


_TIME = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*(s|sec|m|min|h)\s*$", re.I)
_UNIT_S = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600}


def parse_window_at(value: str) -> tuple[int | None, float | None]:
    """``--window-at``: ``STEP`` (an integer) or a time since the start (``90s``, ``5m``,
    ``1.5h``); returns (step, seconds), one of them None."""
    v = value.strip()
    if v.isdigit():
        return int(v), None
    m = _TIME.match(v)
    if m is None:
        raise CaptureError(f"--window-at {value!r}: give a step number (e.g. 500) or a time "
                           "since the start (e.g. 90s, 5m, 1.5h)")
    return None, float(m.group(1)) * _UNIT_S[m.group(2).lower()]


def interrupted_before(opts: Any, complete: list[int], code: int) -> str:
    """Why an interrupted job has no report: where it was against the window."""
    how = "Ctrl-C" if code == 130 else "SIGTERM"
    n = len(complete)
    if opts.wait is not None:
        where = f"steps {opts.wait}-{opts.wait + opts.steps - 1}"
    elif getattr(opts, "window_at_s", None) is not None:
        where = f"the first {opts.steps} steps after {opts.window_at_s:g} s"
    else:
        where = f"{opts.steps} steps once the step time settles"
    return (f"the job was interrupted ({how}) after {n} complete step{'s' if n != 1 else ''}, "
            f"before the recorded window ({where}) had closed: no trace was written, so there "
            "is no report")


def stopped(code: int) -> int:
    """The exit code of a job ``--then stop`` ended: 0, also when the script turned the
    interrupt into an exit of its own (Lightning exits 1 after a graceful shutdown)."""
    extra = "" if code == 0 else f"; the script exited with {code} on the interrupt"
    print(f"advisor: the job was stopped after the recorded window (--then stop){extra}",
          file=sys.stderr)
    return 0


ANALYSIS_AT_END = "ADVISOR_ANALYSIS_AT_END"
"""Set to 1, the analysis waits for the job's end instead of running beside it: for measuring
what the analysis beside the job costs the job (`benchmarks/real_script_ab.py`'s variants)."""


def analysis_at_end() -> bool:
    return os.environ.get(ANALYSIS_AT_END, "") not in ("", "0")


class Handover:
    """The session's callbacks at the window's close and `STEPS_MEASURED_AFTER` steps later."""

    def __init__(self, opts: Any, rank: Any, trace: Path) -> None:
        self.opts, self.rank = opts, rank
        self.child = bool(opts.nsys_child)  # under nsys: the parent hands over
        self.background: BackgroundAnalysis | None = None
        if opts.then == "continue" or self.child:
            self.background = BackgroundAnalysis(opts, rank, trace)

    def window_closed(self, state: Any) -> None:
        if self.child:
            from advisor.capture.options import write_status

            write_status(self.opts.out, self.rank, None, state)  # the parent exports now
        elif self.background is not None and not analysis_at_end():
            self.background.start(state)

    def measured(self, state: Any) -> None:
        if self.background is not None and (self.child or self.background.started):
            self.background.steps(state, final=False)

    def job_ended(self, state: Any, code: int) -> int | None:
        """The job's exit code once the analysis beside it has written its reports; None when
        there is none and the analysis must run here."""
        bg = self.background
        if bg is None or not bg.started:
            return None
        return finish(bg, state, code, self.opts)


def finish(bg: BackgroundAnalysis, state: Any, code: int, opts: Any) -> int | None:
    bg.steps(state, final=True)
    st = bg.wait()
    if st.get("detached") or st.get("state") in ("done", "reported"):
        return code
    if st.get("state") == "failed":
        msg = st.get("error") or "the analysis failed"
        if code == 0:
            raise CaptureError(msg)
        print(f"advisor: error: {msg}", file=sys.stderr)
        return code
    if not opts.quiet:
        print("advisor: the analysis beside the job ended without a report; analysing now",
              file=sys.stderr)
    return None


__all__ = ["STEPS_MEASURED_AFTER", "THEN_CHOICES", "Handover", "default_then", "finish",
           "interrupted_before", "parse_window_at", "stopped"]
