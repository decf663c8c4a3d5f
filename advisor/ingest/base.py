"""One interface for every trace format: `TraceSource.load(path) -> OpGraph`.

Formats register by subclassing `TraceSource`; `load_trace` sniffs the file and picks one.
Sources open input read-only and never write next to it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from advisor.errors import InputError, UnsupportedTraceError
from advisor.graph.model import OpGraph


@dataclass(frozen=True)
class LoadOptions:
    """How much of a trace to load in detail.

    Whole-trace statistics are aggregated at the source; detailed events (every kernel, call
    and range) are loaded only for a window of steady-state steps, so memory is bounded by the
    window, not by the trace's length.
    """

    max_steps: int = 30  # steady-state steps loaded in detail
    max_gpu_ops: int = 400_000  # cap on detailed GPU ops when the trace has no step marks
    step_pattern: str | None = None  # `--steps`: a regular expression naming the step ranges
    pid: int | None = None  # `--pid`: the process analysed (default: the one with most steps)


class TraceSource(ABC):
    format: ClassVar[str]
    registry: ClassVar[list[type[TraceSource]]] = []

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        TraceSource.registry.append(cls)

    @classmethod
    @abstractmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        """True when the first bytes of the file say it is this format."""

    @abstractmethod
    def load(self, path: Path, options: LoadOptions) -> OpGraph:
        """Read the trace; raise `TraceFormatError` with one plain sentence when it cannot."""


def _ensure_sources_imported() -> None:
    # Importing registers the subclasses; done lazily so `advisor rules` stays fast.
    from advisor.ingest import chrome_trace, nsys_sqlite  # noqa: F401


def load_trace(path: str | Path, options: LoadOptions | None = None) -> OpGraph:
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file")
    if p.is_dir():
        raise InputError(f"{p}: is a directory, not a trace file")
    try:
        with p.open("rb") as f:
            head = f.read(64)
    except OSError as e:
        raise InputError(f"{p}: cannot read ({e.strerror})") from e
    if not head:
        raise UnsupportedTraceError(f"{p}: empty file, not a trace")
    _ensure_sources_imported()
    for source in TraceSource.registry:
        if source.sniff(p, head):
            return source().load(p, options or LoadOptions())
    if head.startswith(b"NVIDIA T"):
        raise UnsupportedTraceError(
            f"{p}: an Nsight Systems report (.nsys-rep); export it first: "
            f"nsys export --type sqlite -o {p.with_suffix('.sqlite').name} {p.name}"
        )
    raise UnsupportedTraceError(
        f"{p}: not an Nsight Systems SQLite export or a torch.profiler trace (.json/.json.gz)"
    )
