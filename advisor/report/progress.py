"""Where long work is, on stderr, for a person watching a terminal (rich's status spinner).

Reading a 1 GB export or replaying many steps takes seconds; a silent terminal looks hung. Each
stage shows a spinner while it runs and leaves one line when it ends (what it found, how long it
took). Progress is for people only: it is off when stderr is not a terminal (CI logs, pipes,
files) and with ``--quiet``, so logs and captured output never contain it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from rich.console import Console

from advisor.safe_text import CommandFreeStream, markup


class Progress:
    def __init__(self, enabled: bool, stream: TextIO | None = None) -> None:
        self.enabled = enabled
        self._console = (Console(file=CommandFreeStream(stream or sys.stderr), highlight=False)
                         if enabled else None)

    @classmethod
    def on_stderr(cls, quiet: bool) -> Progress:
        """On when stderr is a terminal and the user did not ask for quiet."""
        return cls(not quiet and sys.stderr.isatty())

    def note(self, message: str) -> None:
        """One line of progress (work that cannot show a spinner, such as a running script)."""
        if self._console is not None:
            self._console.print(f"[dim]advisor:[/] {markup(message)}")

    @contextmanager
    def stage(self, doing: str) -> Iterator[Stage]:
        """``with progress.stage("reading x") as s: ...; s.done("read x: 3 steps")``."""
        stage = Stage(doing)
        if self._console is None:
            yield stage
            return
        start = time.perf_counter()
        with self._console.status(f"{markup(doing)}...", spinner="dots"):
            yield stage
        self._console.print(f"[green]✓[/] {markup(stage.result or doing)} "
                            f"[dim]({time.perf_counter() - start:.1f} s)[/]")


class Stage:
    def __init__(self, doing: str) -> None:
        self.doing = doing
        self.result: str | None = None

    def done(self, result: str) -> None:
        self.result = result
