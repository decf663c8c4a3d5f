"""A torch.profiler trace cut down to the events a rank summary reads: the job path's fast parse.

A rank summary (`advisor.engine.rank_summary`) needs the GPU ops, the launches that place them on the
host timeline, the host calls that may wait for the GPU, and the step, phase and collective
ranges. In a typical Kineto trace those are a third of the events: the rest are CPU operators,
flow arrows (``ac2g``, ``fwdbwd``) and runtime calls such as ``cudaStreamIsCapturing``. The
whole-trace parser (`advisor.ingest`) decodes every event with the stdlib's JSON scanner, so
most of a rank's cost is events the summary never looks at.

Here ``msgspec`` splits the document into raw event slices and reads three fields of each
without building Python objects for the rest (about 40 ms for a 40,000-event, 8 MB trace); the
events kept are decoded in memory and handed to the Kineto loader (`summary_graph`; text that
decode does not take is written, byte for byte, to a temporary trace that the ordinary public
loader, `advisor.ingest.base.load_trace`, reads). The graph built from them is the full one
restricted to what the summary uses, and ``tests/job/test_slim_trace.py`` checks that graphs and
summaries agree on every real trace we have. The parser's own checks (caps on decompression,
types, ranges) still apply to every event kept; anything this reader does not recognise returns
None and the caller parses the original file the ordinary way, which also gives the usual
one-line errors.

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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from advisor.errors import AdvisorError
from advisor.graph.api_names import LONG_CALL_NS, is_launch, may_block
from advisor.graph.collectives import REDUCER_RANGES, host_collective
from advisor.graph.model import OpGraph
from advisor.graph.step_pattern import compile_step_pattern
from advisor.graph.steps import keep_recorded, matches_step, phase_of
from advisor.ingest.base import LoadOptions, load_trace, sniffed_source
from advisor.ingest.compression import MAGIC_BYTES, UNPACK_ERRORS, codec_of
from advisor.ingest.input_file import CappedReader, check_regular, read_head
from advisor.ingest.kineto.event_stream import MAX_INT_DIGITS, MAX_VALUE_CHARS
from advisor.ingest.nsys.export_file import gzipped_sqlite
from advisor.ingest.nsys.schema import SQLITE_MAGIC

try:  # a dependency of advisor; without it the job path parses whole traces (slower, same result)
    import msgspec
except ImportError:  # pragma: no cover - only a partial install lacks it
    msgspec = None

MAX_SLIM_BYTES = 256 << 20
"""Decompressed traces larger than this are parsed by the streaming loader instead: this reader
holds the whole text (and a slice object per event) in memory."""

MAX_DECODED_BYTES = 32 << 20
"""Kept events of more text than this go through the streaming loader (a temporary file of
them) rather than being decoded at once: the decoded events take several times their text,
which the stream never holds together (a 3.5 MB rank, 8,183 events: about 30 MB)."""

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
    _ANY = msgspec.json.Decoder(float_hook=str)  # as `event_stream`'s batches: floats as text

_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_LONG_DIGITS = b"0" * (MAX_INT_DIGITS + 1)


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


@dataclass
class _Scan:
    """A torch.profiler trace's text and what the slim reader found in it."""

    data: bytes  # the whole decompressed text
    top: dict[str, Any]  # top-level key -> its raw JSON (msgspec.Raw)
    keep: list[int]  # the indexes of the events a summary reads
    count: int  # every event of the trace
    has_steps: bool  # a range names a step: the cut may be taken

    @property
    def cut(self) -> bool:
        """Whether the cut is taken (only with named steps; see the module's notes)."""
        return self.has_steps and len(self.keep) < self.count


def _scan(path: Path, options: LoadOptions) -> _Scan | None:
    """The trace read once and its events judged; None for what this reader does not take (an
    nsys export, a trace too large, not a list of event objects, bad JSON: the ordinary
    loader reads those, and says what is wrong with them, if anything)."""
    if msgspec is None:
        return None
    try:
        data = _read(path, options)
        if not data:
            return None
        top = _TOP.decode(data)
        if "traceEvents" not in top:
            return None
        events = _EVENTS.decode(top["traceEvents"])
        if not events:
            return None
        keep, has_steps = _kept_events(events, options)
    except (msgspec.DecodeError, msgspec.ValidationError, OSError, *UNPACK_ERRORS,
            AdvisorError, AttributeError, TypeError, KeyError, ValueError):
        return None
    return _Scan(data, top, keep, len(events), has_steps)


def _kept_text(scan: _Scan) -> bytes:
    """The kept events as one JSON array, each byte for byte as the trace wrote it. The raw
    slices are split out only when some are cut (a second pass over the list: a rank whose
    every event the summary reads, the 2-GPU DDP job's, costs one pass, not two)."""
    if not scan.cut:
        return bytes(scan.top["traceEvents"])
    raws = _LIST.decode(scan.top["traceEvents"])
    return b"".join([b"[", b",".join([bytes(raws[i]) for i in scan.keep]), b"]"])


def _slim_document(scan: _Scan) -> bytes:
    """The trace with only the kept events (the other top-level keys as they were)."""
    parts = [b'{"traceEvents":', _kept_text(scan)]
    for key, value in scan.top.items():
        if key != "traceEvents":
            parts += [b",", msgspec.json.encode(key), b":", bytes(value)]
    parts.append(b"}")
    return b"".join(parts)


@contextlib.contextmanager
def _written(doc: bytes) -> Iterator[Path]:
    """``doc`` in a temporary file, removed on exit."""
    fd, name = tempfile.mkstemp(prefix="advisor-rank-", suffix=".json")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(doc)
        yield Path(name)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(name)


def summary_graph(path: str | Path, options: LoadOptions) -> OpGraph:
    """The op graph a rank summary is made from (`advisor.job.cluster.summarize_file`).

    A torch.profiler trace is read and decoded once: the slim scan's text, cut to the kept
    events when the cut is taken, is decoded whole and handed to the Kineto loader
    (`advisor.ingest.kineto.loader.load_decoded`). Until issue #39's third pass the kept
    events went to a temporary file that the loader decompressed (when the cut was not taken,
    the original file) and decoded again: about 15 ms of the DDP seed's 120 ms a rank in a
    worker (its stream decode took 36 ms, the decode here 17). An nsys export is loaded
    with only a summary's events selected (`SummaryEvents`); anything else the ordinary way."""
    path = Path(path)
    scan = _scan(path, options)
    if scan is not None:
        graph = _decoded_graph(path, scan, options)
        if graph is not None:
            return graph
        if scan.cut:  # text the in-memory decode does not take: the kept events, re-read
            with _written(_slim_document(scan)) as slim:
                return load_trace(slim, options)
    # an nsys export's loader keeps only these events (the Kineto reader reads every event)
    return load_trace(path, replace(options, events=SummaryEvents(options.step_pattern)))


def _decoded_graph(path: Path, scan: _Scan, options: LoadOptions) -> OpGraph | None:
    """The kept events' graph from the text in memory, or None where that decode could give
    other values than the stream's (`advisor.ingest.kineto.event_stream`): a file another
    format takes, text past the stream's one-value cap, an integer literal longer than it
    keeps as a number, or text msgspec refuses (NaN, a lone surrogate escape); also kept
    events too large to hold decoded at once (`MAX_DECODED_BYTES`)."""
    from advisor.ingest.kineto.loader import ChromeTraceSource, load_decoded

    if len(scan.data) > MAX_VALUE_CHARS or sniffed_source(path, read_head(path, 64)) \
            is not ChromeTraceSource:
        return None
    text = _kept_text(scan)
    if len(text) > MAX_DECODED_BYTES:
        return None
    others = {key: bytes(value) for key, value in scan.top.items() if key != "traceEvents"}
    if any(_has_long_integer(t) for t in [text, *others.values()]):
        return None
    try:
        events = _events(text)
        metadata = {key: _ANY.decode(value) for key, value in others.items()}
    except (msgspec.DecodeError, RecursionError):
        return None
    graph = load_decoded(path, events, metadata, options)
    if options.recorded_steps is not None:
        keep_recorded(graph, options.recorded_steps)
    return graph


def _events(text: bytes) -> list[Any]:
    """The kept events as the Kineto stream decodes a batch: records
    (`advisor.ingest.kineto.event_record`) where every element is an event, else values."""
    from advisor.ingest.kineto.event_record import records_decoder

    try:
        return records_decoder().decode(text)
    except msgspec.ValidationError:  # JSON, but not all events: as values, as the stream does
        return _ANY.decode(text)


def _has_long_integer(text: bytes) -> bool:
    """A run of more digits than the stream reads as a number (`MAX_INT_DIGITS`): the stream
    keeps such a literal as text, msgspec as an int. A copy with every digit as ``0``, then
    ``bytes.find`` (C: 6 ms for 3.5 MB, where a regular expression took 45 ms)."""
    return text.translate(_DIGITS_AS_ZERO).find(_LONG_DIGITS) >= 0
