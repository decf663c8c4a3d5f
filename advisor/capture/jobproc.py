"""The job's process ends as it would under plain ``python``: forks and SIGTERM.

advisor runs the script in its own interpreter, so whatever advisor adds to the process (hooks,
the profiler, the analysis process beside the job, a SIGTERM handler) is inherited by what the
script does with the process. Two things must not change how the job behaves:

* **Forks.** A child of ``os.fork`` (a script's own, multiprocessing's fork start, DataLoader
  workers) gets no advisor: an at-fork handler makes the session inert in the child (every hook
  returns at once; no window, no files, no analysis) and gives SIGTERM back its default, and
  the runner then returns the child's exit code with none of advisor's end-of-job work. That
  work in a child would stop a profiler whose threads the fork did not copy and wait on an
  analysis process that is the parent's, not the child's: the child hung at its exit and its
  parent waited for it forever. Exec'd children start a fresh interpreter and see nothing of
  advisor (no environment variable is added).
* **SIGTERM** (what schedulers send) ends the process as its default action does: killed by the
  signal, which a shell reports as 143, even under a script whose bare ``except:`` would swallow
  an exception raised for it. Before that advisor does only what is quick and safe: it closes
  the window (the trace is written), records the session's state and hands the step clock to
  the analysis beside the job, which the signal does not reach and which writes the reports.
  A script that installs its own handler replaces advisor's, so its handler runs as it would,
  and while it runs ``signal.getsignal``/``signal.signal`` report advisor's handler as the
  default (a handler that chains to the one it found must not reach advisor's); a SIGTERM
  that the launcher left ignored (``SIG_IGN``, inherited) stays ignored.

SIGINT is left alone: Python's default raises KeyboardInterrupt into the script, under advisor
as without it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator

_job_pid: int | None = None  # the process that runs the script under advisor
_registered = False
_tracer_forked = False  # this forked child inherited the profiler's threads' state
_child_code = 0  # the forked child's exit code, once the script has ended in it


def in_forked_child() -> bool:
    """Whether this process is a fork of the job's (advisor does nothing of its own here)."""
    return _job_pid is not None and os.getpid() != _job_pid


def _after_fork_in_child() -> None:
    """Drop advisor from a forked child: cheap, and never raises (DataLoader workers run it)."""
    global _tracer_forked
    if _job_pid is None:
        return
    with contextlib.suppress(Exception):
        from advisor.capture import session

        sess = session.active()
        if sess is not None:
            _tracer_forked = sess.tracer_started()
            sess.detach()
            session.activate(None)
    with contextlib.suppress(Exception):  # ValueError when the fork came from another thread
        if _real_getsignal(signal.SIGTERM) is _on_sigterm:
            _real_signal(signal.SIGTERM, signal.SIG_DFL)


def watch_forks() -> None:
    """Mark this process as the job's; forks of it from now on drop advisor in the child.
    (At-fork handlers cannot be removed: registered once, they act only while a job runs.)"""
    global _job_pid, _registered
    _job_pid = os.getpid()
    if not _registered and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork_in_child)
        atexit.register(_end_forked_child)  # before the script's own: runs after them
        _registered = True


def child_exits(code: int) -> int:
    """The script has ended in a forked child with ``code``: what the child's exit returns."""
    global _child_code
    _child_code = code
    return code


def _end_forked_child() -> None:
    """A forked child that inherited the profiler's state ends here, once Python's exit
    handlers (the script's, registered later, ran first) are done: Kineto's C++ destructors at
    the process's exit wait on a condition variable of a thread the fork did not copy, and the
    child would hang there forever (with its parent waiting for it). Only those destructors
    are skipped; a child forked before the profiler ever started ends normally."""
    if not (_tracer_forked and in_forked_child()):
        return
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(_child_code)


def job_ended() -> None:
    global _job_pid
    _job_pid = None


_on_term: Callable[[], None] | None = None


def _on_sigterm(signum: int, frame: object) -> None:
    """SIGTERM's default action, after advisor's quick work: the process is killed by it."""
    _real_signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends it at once
    if _on_term is not None and not in_forked_child():
        with contextlib.suppress(BaseException):
            _on_term()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os.kill(os.getpid(), signal.SIGTERM)
    os._exit(128 + signal.SIGTERM)  # not reached: the signal's default ends the process first


@contextlib.contextmanager
def sigterm_default(on_term: Callable[[], None]) -> Iterator[None]:
    """While the script runs, SIGTERM runs ``on_term`` (advisor's quick work) and then ends the
    process as its default would. Installed only where SIGTERM has its default action and on
    the main thread (where Python runs signal handlers); otherwise nothing changes."""
    global _on_term
    if (threading.current_thread() is not threading.main_thread()
            or _real_getsignal(signal.SIGTERM) is not signal.SIG_DFL):
        yield
        return
    _on_term = on_term
    _real_signal(signal.SIGTERM, _on_sigterm)
    signal.getsignal, signal.signal = _getsignal, _signal  # type: ignore[assignment]
    try:
        yield
    finally:
        signal.getsignal, signal.signal = _real_getsignal, _real_signal
        _on_term = None
        # the script has ended: a handler of its own would find its state torn down
        _real_signal(signal.SIGTERM, signal.SIG_DFL)


_real_getsignal, _real_signal = signal.getsignal, signal.signal


def _getsignal(signalnum: int) -> object:
    """`signal.getsignal` as the script sees it: advisor's SIGTERM handler is the default.
    Frameworks chain to the handler they find (Lightning calls it after its own, which only
    notes the signal): finding advisor's, they would end a job that python lets run on."""
    handler = _real_getsignal(signalnum)
    return signal.SIG_DFL if handler is _on_sigterm else handler


def _signal(signalnum: int, handler: object) -> object:
    """`signal.signal` as the script sees it: the previous handler it returns is the default
    where it was advisor's (see `_getsignal`)."""
    previous = _real_signal(signalnum, handler)  # type: ignore[arg-type]
    return signal.SIG_DFL if previous is _on_sigterm else previous


def streams_left_closed() -> None:
    """After the script: a standard stream whose descriptor the script closed (``os.close(1)``)
    becomes a sink, so advisor's own messages are lost as the script's would be instead of
    raising and changing the job's exit code (plain python exits 0 there)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        try:
            stream.flush()
            os.fstat(stream.fileno())
        except (AttributeError, OSError, ValueError):
            setattr(sys, name, open(os.devnull, "w"))  # noqa: SIM115 - lives as long as sys's
