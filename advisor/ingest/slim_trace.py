"""A torch.profiler trace cut down to the events a rank summary reads: the job path's fast parse.

A rank summary (`advisor.engine.rank_summary`) needs the GPU ops, the launches that place them on the
host timeline, the host calls that may wait for the GPU, and the step, phase and collective
ranges. In a typical Kineto trace those are a third of the events: the rest are CPU operators,
flow arrows (``ac2g``, ``fwdbwd``) and runtime calls such as ``cudaStreamIsCapturing``. The
whole-trace parser (`advisor.ingest`) decodes every event with the stdlib's JSON scanner, so
most of a rank's cost is events the summary never looks at.

Here ``msgspec`` splits the document into raw event slices and reads three fields of each
without building Python objects for the rest (about 40 ms for a 40,000-event, 8 MB trace); the
events kept are written, byte for byte, to a temporary trace that the ordinary public loader
(`advisor.ingest.base.load_trace`) reads. The graph built from it is the full one restricted to
what the summary uses, and ``tests/job/test_slim_trace.py`` checks that summaries agree on
every real trace we have. The parser's own checks (caps on decompression, types, ranges) still
apply to every event kept; anything this reader does not recognise returns None and the caller
parses the original file the ordinary way, which also gives the usual one-line errors.

The cut is only taken when the trace has named step ranges: without them steps come from the
launch pattern, whose check compares all host ranges of each repeat, so every range matters.

An nsys export is cut the same way, by its own loader: `SummaryEvents` (the same tests as the
torch.profiler cut) goes in `LoadOptions.events`, and the loader selects only those calls and
ranges of the window in SQL (`advisor.ingest.nsys.loader`), so the rows a summary never reads
are never turned into Python objects (issue #39).
"""

from __future__ import annotations

import codecs
import contextlib
import functools
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from advisor.errors import AdvisorError
from advisor.graph.api_names import LONG_CALL_NS, is_launch, may_block
from advisor.graph.collectives import REDUCER_RANGES, host_collective
from advisor.graph.step_pattern import compile_step_pattern
from advisor.graph.steps import matches_step, phase_of
from advisor.ingest.base import LoadOptions
from advisor.ingest.compression import MAGIC_BYTES, UNPACK_ERRORS, codec_of
from advisor.ingest.input_file import CappedReader, check_regular
from advisor.ingest.nsys.export_file import gzipped_sqlite
from advisor.ingest.nsys.schema import SQLITE_MAGIC

try:  # a dependency of advisor; without it the job path parses whole traces (slower, same result)
    import msgspec
except ImportError:  # pragma: no cover - only a partial install lacks it
    msgspec = None

MAX_SLIM_BYTES = 256 << 20
"""Decompressed traces larger than this are parsed by the streaming loader instead: this reader
holds the whole text (and a slice object per event) in memory."""

_GPU = frozenset({"kernel", "gpu_memcpy", "memcpy", "gpu_memset", "memset", "cuda_sync",
                  "cuda_profiler_range"})
_API = frozenset({"cuda_runtime", "runtime", "cuda_driver"})
_RANGES = frozenset({"cpu_op", "operator", "user_annotation", "python_function"})

if msgspec is not None:
    class _Args(msgspec.Struct):
        correlation: Any = None

    class _Event(msgspec.Struct):
        ph: Any = None
        cat: Any = None
        name: Any = None
        dur: Any = None  # a long call is kept: the host floor counts it as held (summary)
        args: _Args | None = None  # only the correlation id is decoded

    _EVENTS = msgspec.json.Decoder(list[_Event])
    _TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])
    _LIST = msgspec.json.Decoder(list[msgspec.Raw])


@dataclass(frozen=True)
class SummaryEvents:
    """The host events a rank summary reads (`advisor.ingest.base.EventFilter`): calls that
    launch or may wait for the GPU, long calls, and the step, phase and collective ranges.
    Names repeat (every step runs the same operators and calls): each is judged once."""

    step_pattern: str | None = None
    long_call_ns: int = LONG_CALL_NS

    def keeps_call(self, name: str) -> bool:
        return is_launch(name) or may_block(name) or name.startswith("cudaMemsetAsync")

    def judge_range(self, name: str) -> tuple[bool, bool]:
        """(keep it, it is a step)."""
        step = matches_step(name, _pattern(self.step_pattern))
        return bool(step or phase_of(name) or host_collective(name)
                    or name.startswith(REDUCER_RANGES)), step

    def keeps_range(self, name: str) -> bool:
        return self.judge_range(name)[0]


@functools.lru_cache(maxsize=8)
def _pattern(text: str | None):
    """``--steps`` compiled once per process (the filter travels to the workers as its text)."""
    return compile_step_pattern(text)


def _read(path: Path, options: LoadOptions) -> bytes | None:
    """The decompressed text, or None when it is too large for this reader or an nsys export
    (told by its first bytes: it was decompressed whole before, 40 ms a 4 MB export)."""
    check_regular(path)
    with path.open("rb") as f:
        head = f.read(max(len(SQLITE_MAGIC), MAGIC_BYTES))
    packed = codec_of(head) is not None
    if head.startswith(SQLITE_MAGIC) or (packed and gzipped_sqlite(path)):
        return None
    if packed:
        with CappedReader(path, options.unpack_limits) as f:
            data = f.read(MAX_SLIM_BYTES + 1)
    else:
        with path.open("rb") as f:
            data = f.read(MAX_SLIM_BYTES + 1)
    return None if len(data) > MAX_SLIM_BYTES else data.removeprefix(codecs.BOM_UTF8)


def _kept_events(events: list[Any], options: LoadOptions) -> tuple[list[int], bool]:
    """The indexes of the events to keep, and whether any range is a step. Range names repeat
    (every step runs the same operators), so each name is judged once."""
    wanted = SummaryEvents(options.step_pattern)
    gpu_correlations = {e.args.correlation for e in events
                        if e.args is not None and isinstance(e.cat, str) and e.cat.lower() in _GPU}
    judged: dict[str, tuple[bool, bool]] = {}  # range name -> (keep, is a step)
    kept: list[int] = []
    has_steps = False
    for i, e in enumerate(events):
        if e.ph == "M":
            kept.append(i)
            continue
        if e.ph != "X" or not isinstance(e.cat, str):
            continue
        cat = e.cat.lower()
        if cat in _GPU:
            kept.append(i)
        elif cat in _API:
            name = e.name if isinstance(e.name, str) else ""
            corr = e.args.correlation if e.args is not None else None
            if wanted.keeps_call(name) or (
                    corr is not None and corr in gpu_correlations) or _long(e.dur):
                kept.append(i)
        elif cat in _RANGES and isinstance(e.name, str):
            verdict = judged.get(e.name)
            if verdict is None:
                verdict = judged[e.name] = wanted.judge_range(e.name)
            if verdict[0]:
                kept.append(i)
            has_steps = has_steps or verdict[1]
    return kept, has_steps


def _long(dur: Any) -> bool:
    """A call longer than `api_names.LONG_CALL_NS` (Kineto writes µs, as a number or its text)."""
    try:
        return float(dur) * 1000 > LONG_CALL_NS
    except (TypeError, ValueError):
        return False


def _slim_document(data: bytes, options: LoadOptions) -> bytes | None:
    top = _TOP.decode(data)
    if "traceEvents" not in top:
        return None
    events = _EVENTS.decode(top["traceEvents"])
    if not events:
        return None
    keep, has_steps = _kept_events(events, options)
    if not has_steps or len(keep) == len(events):
        return None  # no steps, or nothing to cut: the original file is as quick to read
    # the events' raw slices only now that some are cut (a second pass over the list: a rank
    # whose every event the summary reads, the 2-GPU DDP job's, costs one pass, not two)
    raws = _LIST.decode(top["traceEvents"])
    parts = [b'{"traceEvents":[', b",".join(bytes(raws[i]) for i in keep), b"]"]
    for key, value in top.items():
        if key != "traceEvents":
            parts += [b",", msgspec.json.encode(key), b":", bytes(value)]
    parts.append(b"}")
    return b"".join(parts)


@contextlib.contextmanager
def slim_copy(path: str | Path, options: LoadOptions) -> Iterator[Path | None]:
    """A temporary trace holding only the events a rank summary reads, removed on exit; None
    when the file is not a torch.profiler trace this reader takes (an nsys export, a trace
    without step ranges, one too large, or anything it does not recognise)."""
    path = Path(path)
    doc = None
    if msgspec is not None:
        try:
            data = _read(path, options)
            doc = _slim_document(data, options) if data else None
        except (msgspec.DecodeError, msgspec.ValidationError, OSError, *UNPACK_ERRORS,
                AdvisorError, AttributeError, TypeError, KeyError, ValueError):
            doc = None  # the ordinary loader reads it and says what is wrong, if anything
    if doc is None:
        yield None
        return
    fd, name = tempfile.mkstemp(prefix="advisor-rank-", suffix=".json")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(doc)
        del doc
        yield Path(name)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(name)
