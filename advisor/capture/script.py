"""Run the user's script in this interpreter the way ``python SCRIPT ARGS`` would.

Same ``sys.argv``, ``sys.path[0]`` (the script's directory), working directory and streams;
the script is ``__main__``. Its exit code is what Python's would be: ``sys.exit(n)`` gives n,
``sys.exit("msg")`` prints msg and gives 1, an uncaught exception prints the script's own
traceback (no advisor or runpy frames) through ``sys.excepthook`` and gives 1.
"""

from __future__ import annotations

import contextlib
import os
import runpy
import signal
import sys
from dataclasses import dataclass
from types import TracebackType

from advisor.capture.capture_state import StopAfterWindow
from advisor.errors import CaptureError, ExitCode

SIGINT_EXIT = 130
SIGTERM_EXIT = 128 + signal.SIGTERM  # 143, what a shell reports for a job ended by SIGTERM


@dataclass(frozen=True)
class Target:
    """What to run: a script path, or a module name (``-m``)."""

    name: str
    module: bool = False

    def origin(self) -> str | None:
        """The file whose frames are the script's own."""
        if not self.module:
            return os.path.realpath(self.name)
        import importlib.util

        try:
            spec = importlib.util.find_spec(self.name)
        except (ImportError, ValueError):
            return None
        if spec is None or spec.origin is None:
            return None
        if spec.submodule_search_locations:  # a package: its __main__ runs
            main = os.path.join(os.path.dirname(spec.origin), "__main__.py")
            return os.path.realpath(main)
        return os.path.realpath(spec.origin)

    def check(self) -> None:
        """Fail before anything runs, with Python's own message and exit status, when there is
        nothing to run: a script run by advisor keeps the exit code ``python`` would give it."""
        if self.module:
            import runpy

            try:  # what `python -m` itself calls, so the message is the one it prints
                runpy._get_module_details(self.name)  # type: ignore[attr-defined]
            except ImportError as e:
                raise NothingToRun(str(e), 1) from e
            return
        if not os.path.exists(self.name):
            raise NothingToRun(f"can't open file {os.path.abspath(self.name)!r}: "
                               "[Errno 2] No such file or directory", 2)
        if os.path.isdir(self.name) and not os.path.exists(os.path.join(self.name, "__main__.py")):
            raise NothingToRun(f"can't find '__main__' module in "
                               f"{os.path.abspath(self.name)!r}", 1)


class NothingToRun(CaptureError):
    """SCRIPT names nothing Python could run; the exit status is Python's for the same case
    (1 for a missing module or a directory without ``__main__.py``, 2 for a missing file)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = ExitCode(exit_code)


def exit_code_of(code: object) -> int:
    """Python's exit status for ``SystemExit(code)`` (printing a non-integer code, as it does)."""
    if code is None:
        return 0
    if isinstance(code, bool):
        return int(code)
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _script_frames(tb: TracebackType | None, origin: str | None) -> TracebackType | None:
    """The traceback from the script's first frame on: runpy's and advisor's frames dropped."""
    if origin is None:
        return None
    cur = tb
    while cur is not None:
        filename = cur.tb_frame.f_code.co_filename
        if filename == origin or os.path.realpath(filename) == origin:
            return cur
        cur = cur.tb_next
    return None


def run(target: Target, args: list[str]) -> int:
    """Run the target as ``__main__``; return its exit code. Never raises for the script's errors."""
    saved_argv, saved_path0 = sys.argv, sys.path[0] if sys.path else None
    origin = target.origin()
    if target.module:
        sys.argv = [origin or target.name, *args]
        sys.path.insert(0, os.getcwd())
    else:
        sys.argv = [target.name, *args]
        here = os.path.dirname(os.path.realpath(target.name))
        if os.path.isdir(target.name):
            here = os.path.realpath(target.name)
        if sys.path:
            sys.path[0] = here
        else:
            sys.path.append(here)
    try:
        if target.module:
            runpy.run_module(target.name, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(target.name, run_name="__main__")
        code = 0
    except SystemExit as e:
        code = exit_code_of(e.code)
    except StopAfterWindow:  # --then stop: the runner says so
        code = 0
    except KeyboardInterrupt as e:
        _print_exception(e, origin)
        code = SIGINT_EXIT
    except BaseException as e:  # the script's own error: shown as Python would show it
        _print_exception(e, origin)
        code = 1
    finally:
        _flush()
        sys.argv = saved_argv
        if target.module:
            if sys.path and sys.path[0] == os.getcwd():
                del sys.path[0]
        elif saved_path0 is not None and sys.path:
            sys.path[0] = saved_path0
    return code


def _print_exception(e: BaseException, origin: str | None) -> None:
    _flush()
    tb = _script_frames(e.__traceback__, origin)
    e.__traceback__ = tb
    try:
        sys.excepthook(type(e), e, tb)
    except Exception:  # a broken excepthook of the script's: fall back to the default
        sys.__excepthook__(type(e), e, tb)
    _flush()


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
