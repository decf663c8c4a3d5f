"""The user's ``--steps REGEX``, compiled for RE2: its matching time is linear, whatever it says.

The pattern is searched in every distinct range name of a trace, names of up to 16,384
characters (`advisor.ingest.input_file.MAX_NAME_CHARS`). Python's ``re`` backtracks:
``(a+)+$`` against ``aaaa...a!`` ran past 60 s on one name, and no static check of a pattern
catches every slow one (``.*.*.*x`` is polynomial; ``(a|a)*`` exponential). RE2 (Google's
engine, the ``google-re2`` package) matches in time linear in the name and bounds the memory of
a compiled pattern (``max_mem``), so a pattern is either refused at compile time in one line or
runs in bounded time. What RE2 leaves out, lookaround and backreferences, are the constructs
that need backtracking; ``--steps`` names ranges, which never needs them. Its other
differences from ``re``: ``\\d`` and ``\\w`` are ASCII, ``\\Z`` is spelled ``\\z``, and a
repetition count it cannot read (``a{99999999999}``) is literal text.
"""

from __future__ import annotations

from typing import Any, Protocol

_MAX_MEM = 8 << 20  # RE2's own default; said here because it is the bound we rely on


class StepPattern(Protocol):
    """A compiled ``--steps`` pattern: ``search`` finds it anywhere in a name."""

    def search(self, text: str) -> Any: ...


def compile_step_pattern(pattern: str | None) -> StepPattern | None:
    """The user's ``--steps`` pattern compiled for RE2, or None; `InputError` in one line when
    RE2 refuses it (bad syntax, lookaround, backreferences, too large)."""
    if pattern is None:
        return None
    from advisor.errors import InputError

    try:
        import re2
    except ImportError as e:  # pragma: no cover - a partial install: pyproject requires it
        raise InputError("--steps needs the google-re2 package (a dependency of advisor; "
                         "pip install google-re2)") from e
    options = re2.Options()
    options.log_errors = False  # RE2 would log each refusal to stderr besides our error line
    options.max_mem = _MAX_MEM
    try:
        return re2.compile(pattern, options=options)
    except (re2.error, ValueError, TypeError, OverflowError) as e:
        raise InputError(f"--steps {pattern!r}: not a regular expression RE2 can run "
                         f"({_reason(e)}); --steps uses RE2 syntax, without lookaround or "
                         "backreferences") from e


def _reason(error: Exception) -> str:
    """RE2's message as text (the binding gives it as bytes)."""
    arg = error.args[0] if error.args else error
    return arg.decode("utf-8", "replace") if isinstance(arg, bytes) else str(arg)
