"""Every failure a user can cause, as one exception tree with its exit code.

The CLI catches `AdvisorError` in one place and prints its message on one line (HTTPie's
funnel; ``--traceback`` adds the traceback); anything else is a bug in advisor, which prints its
traceback and exits 70 so that it is never mistaken for a verdict.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    GATE_FAILED = 1  # `advisor gate`: the candidate regressed
    BAD_INPUT = 2  # usage errors, unreadable or unsuitable input, inconclusive comparisons
    SCRIPT_FAILED = 3  # `advisor profile`: the user's script exited non-zero (its code wins)


class AdvisorError(Exception):
    """An error the user can act on; ``str(err)`` is the one line we print."""

    exit_code: ExitCode = ExitCode.BAD_INPUT


class InputError(AdvisorError):
    """A path that is missing, a directory, or not a trace we can read."""


class TraceFormatError(InputError):
    """A file of a known format that is truncated, corrupt or lacks what we need."""


class UnsupportedTraceError(InputError):
    """A readable file that is not a trace advisor understands."""


class AnalysisError(AdvisorError):
    """The trace was read but cannot answer the question (no steps to compare, say)."""


class OutputError(AdvisorError):
    """A report could not be written where the user asked."""


class CaptureError(AdvisorError):
    """`advisor profile` could not run or trace the user's script."""
