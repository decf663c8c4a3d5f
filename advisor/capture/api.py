"""`step()` and `phase(name)`: mark a loop that the automatic hooks cannot see.

Under `advisor profile` they drive the same session as the hooks (the window counts these
steps); elsewhere they only emit NVTX ranges, and record_function ranges while a torch.profiler
of the script's own records, so a plain ``nsys profile`` or ``torch.profiler`` run sees them too.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def _session():
    from advisor.capture import session

    return session.active() or session.standalone()


class _Mark:
    """A context manager that is also a decorator (each call of the function is one mark)."""

    def __call__(self, fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self._copy():
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    def _copy(self) -> _Mark:
        raise NotImplementedError


class _Step(_Mark):
    def __init__(self) -> None:
        self._session = None

    def _copy(self) -> _Step:
        return _Step()

    def __enter__(self) -> _Step:
        s = _session()
        if s.installed and threading.get_ident() != s.tid:
            return self  # the hooks watch the main thread; other threads are not the loop
        self._session = s
        s.explicit_step_enter()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self._session is not None:
            self._session.explicit_step_exit(complete=exc_type is None)
            self._session = None


class _Phase(_Mark):
    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("phase() needs a name, e.g. phase('forward')")
        self.name = name
        self._session = None

    def _copy(self) -> _Phase:
        return _Phase(self.name)

    def __enter__(self) -> _Phase:
        s = _session()
        if s.installed and threading.get_ident() != s.tid:
            return self
        self._session = s
        s.explicit_phase_enter(self.name)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self._session is not None:
            self._session.explicit_phase_exit()
            self._session = None


def step(fn: F | None = None) -> Any:
    """Mark one training step: ``with step(): ...``, ``@step`` or ``@step()``.

    Under `advisor profile` these steps replace the ones cut at ``optimizer.step()``.
    """
    if fn is not None:
        if not callable(fn):
            raise TypeError("step() takes no arguments, or the function to decorate")
        return _Step()(fn)
    return _Step()


def phase(name: str) -> _Phase:
    """Mark a phase of the step: ``with phase("data"): ...`` or ``@phase("forward")``.

    Names advisor knows: data, forward, loss, backward, optimizer; others are kept as written.
    """
    return _Phase(name)
