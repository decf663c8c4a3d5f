"""One interface for every trace format: `TraceSource.load(path) -> OpGraph`.

Formats are plugins of the ``advisor.formats`` entry-point group, as rules are of
``advisor.rules`` (pyproject.toml): the built-in readers are registered the way a team's own
package would register one, and none is listed in code. `load_trace` sniffs the file and asks
each format in name order. Sources open input read-only and never write next to it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import ClassVar, Protocol

from advisor.errors import AdvisorError, UnsupportedTraceError
from advisor.graph.model import OpGraph
from advisor.graph.steps import keep_recorded
from advisor.ingest.input_file import GIB, UnpackLimits, read_head
from advisor.plugins import entry_points  # not importlib.metadata's: start-up cost (issue #39)


class EventFilter(Protocol):
    """Which host events a reader that only needs some of the trace keeps (the job path's rank
    summary, `advisor.ingest.slim_trace.SummaryEvents`): a source that can select rows by name
    (the nsys loader, in SQL) reads only these, once the steps are found from named ranges."""

    long_call_ns: int  # a call longer than this is kept whatever its name

    def keeps_call(self, name: str) -> bool:
        """Keep the CUDA API calls of this (normalised) name."""

    def keeps_range(self, name: str) -> bool:
        """Keep the ranges (NVTX, record_function) of this name."""


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
    max_unpacked_bytes: int = 32 * GIB  # a .gz input may not unpack to more (`input_file`)
    max_unpack_ratio: float = 200.0  # ... nor to more than this times its size (past a floor)
    # `advisor profile`: the step numbers that ran to their end inside the recorded window; the
    # other numbered steps are dropped as the graph is loaded (`advisor.graph.steps.keep_recorded`)
    recorded_steps: frozenset[int] | None = None
    # only the host events this filter keeps, plus every call that launched GPU work (a reader
    # that needs part of the trace: `EventFilter`); None: all of them
    events: EventFilter | None = None

    @property
    def unpack_limits(self) -> UnpackLimits:
        return UnpackLimits(self.max_unpacked_bytes, self.max_unpack_ratio)


GROUP = "advisor.formats"


class FormatPluginError(AdvisorError):
    """A trace-format plugin could not be loaded."""


class TraceSource(ABC):
    format: ClassVar[str]  # the entry point's name in `GROUP`, and the JSON ``trace.format``

    @classmethod
    @abstractmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        """True when the first bytes of the file say it is this format."""

    @abstractmethod
    def load(self, path: Path, options: LoadOptions) -> OpGraph:
        """Read the trace; raise `TraceFormatError` with one plain sentence when it cannot."""


@cache
def trace_sources() -> tuple[type[TraceSource], ...]:
    """Every registered format, in name order; loaded on first use, so `advisor rules` never
    imports a reader. A plugin that fails to load names itself (never a silently missing
    format)."""
    found: list[type[TraceSource]] = []
    for ep in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        where = f"trace-format plugin {ep.name!r} ({ep.value})"
        try:
            cls = ep.load()
        except Exception as e:  # a broken plugin must name itself
            raise FormatPluginError(f"{where} failed to load: {e}") from e
        if not (isinstance(cls, type) and issubclass(cls, TraceSource)):
            raise FormatPluginError(f"{where} is not an advisor TraceSource class")
        if getattr(cls, "format", None) != ep.name:
            raise FormatPluginError(f"{where} names its format {getattr(cls, 'format', None)!r}: "
                                    "they must match")
        found.append(cls)
    if not found:
        raise FormatPluginError("no trace formats are registered: is advisor installed "
                                "(pip install -e .)?")
    return tuple(found)


def sniffed_source(path: Path, head: bytes) -> type[TraceSource] | None:
    """The format that takes the file (the first, in name order, whose sniff says so)."""
    for source in trace_sources():
        if source.sniff(path, head):
            return source
    return None


def load_trace(path: str | Path, options: LoadOptions | None = None) -> OpGraph:
    p = Path(path)
    head = read_head(p, 64)  # refuses missing, non-regular and unreachable files
    if not head:
        raise UnsupportedTraceError(f"{p}: empty file, not a trace")
    options = options or LoadOptions()
    source = sniffed_source(p, head)
    if source is not None:
        graph = source().load(p, options)
        if graph.info.format == "nsys-sqlite":  # Python stacks advisor sampled beside it
            from advisor.ingest.pystacks import attach

            attach(graph, p)
        if options.recorded_steps is not None:
            keep_recorded(graph, options.recorded_steps)
        return graph
    if head.startswith(b"NVIDIA T"):
        raise UnsupportedTraceError(
            f"{p}: an Nsight Systems report (.nsys-rep); export it first: "
            f"nsys export --type sqlite -o {p.with_suffix('.sqlite').name} {p.name}"
        )
    raise UnsupportedTraceError(
        f"{p}: not an Nsight Systems SQLite export or a torch.profiler trace (.json/.json.gz/.json.xz)"
    )
