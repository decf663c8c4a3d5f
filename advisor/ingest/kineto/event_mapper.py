"""Translate Kineto trace events into op-graph nodes, one event at a time.

Only the translation lives here; which host process launched a GPU op, the analysis window and
the trace-level facts are settled afterwards in `advisor.ingest.kineto.loader`, once every event
has been seen (a kernel is often written before the call that launched it).

Kineto has written two vocabularies: the 2021 one (``Kernel``, ``Runtime``, ``Operator``,
``Memcpy``, ``Memset``) and today's (``kernel``, ``cuda_runtime``, ``cpu_op`` ...). Categories are
compared lower-cased, so both map through one table.
"""

from __future__ import annotations

import re
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import msgspec

from advisor.graph.api_names import normalize
from advisor.graph.model import (
    ApiCall,
    ApiLayer,
    CpuRange,
    GpuOp,
    GpuOpKind,
    RangeSource,
    SyncKind,
    SyncWait,
)
from advisor.ingest.input_file import MAX_NAME_CHARS
from advisor.ingest.kineto.event_record import ABSENT, NO_ARGS, Args, EventRecord, record_of
from advisor.ingest.kineto.event_stream import NS_LIMIT, us_to_ns
from advisor.ingest.kineto.event_stream import batch_decoder as values_decoder

# Record-function names torch.profiler itself emits. The 2021 format files them under
# ``Operator``, next to aten ops; they are annotations (steps, phases), not operators.
_PROFILER_ANNOTATION = re.compile(
    r"^(?:ProfilerStep#\d+|enumerate\(DataLoader\)#|Optimizer\.\w+#|## .* ##$)"
)


@lru_cache(maxsize=65536)  # asked of every operator; a trace repeats its operators' names
def _is_profiler_annotation(name: str) -> bool:
    return bool(_PROFILER_ANNOTATION.match(name))


_COPY_KIND = re.compile(r"\b(HtoD|DtoH|DtoD|HtoH|PtoP|DtoA|AtoD|AtoH|HtoA|AtoA)\b")
_TRAILING_INT = re.compile(r"(-?\d{1,18})\s*$")  # bounded: a 5,000-digit "pid" is a label
_MAX_SHAPE_DEPTH = 8
_SURROGATE = re.compile("[\ud800-\udfff]")

SYNC_KINDS = {
    "stream sync": SyncKind.STREAM,
    "event sync": SyncKind.EVENT,
    "context sync": SyncKind.DEVICE,
    "device sync": SyncKind.DEVICE,
    "stream wait event": SyncKind.STREAM_WAIT_EVENT,
}
_UNSEEN = object()
_OPERATOR = RangeSource.OPERATOR
_PYTHON = RangeSource.PYTHON
_MAX_CATEGORIES = 1024
_MAX_CACHED = 1 << 16
_NO_STREAM = (-1, 4294967295)  # CUPTI's "no stream" for context and event syncs


def clean_text(value: Any) -> str:
    """Text from the trace, bounded (`MAX_NAME_CHARS`) and encodable: a JSON escape of a lone
    surrogate (``"\\ud800"``) decodes to a str that no UTF-8 stream or file can take, so each
    such code point becomes U+FFFD here, before any report prints it."""
    text = value if type(value) is str else str(value)
    if len(text) > MAX_NAME_CHARS:
        text = text[:MAX_NAME_CHARS]
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = _SURROGATE.sub("\ufffd", text)  # pairs were joined by the JSON decoder
    return text


def as_int_id(value: Any) -> int:
    """A pid/tid as an int: Kineto writes ints, numeric strings or labels like ``stream 7``
    (an absent pid, `ABSENT`, is 0, as ``event.get("pid", 0)`` read it)."""
    if type(value) is int:
        return value
    if value is ABSENT:
        return 0
    text = str(value)
    match = _TRAILING_INT.search(text)
    if match:
        return int(match.group(1))
    # a stable id for a purely textual label (which may hold a lone surrogate: see clean_text)
    return -(zlib.crc32(text.encode("utf-8", "surrogatepass")) + 1)


def _as_tuple(value: Any, depth: int = 0) -> Any:
    """JSON lists (shapes nest: a TensorList input is a list of shapes) -> hashable tuples;
    dicts (not a shape) and nesting deeper than any shape read as None."""
    if isinstance(value, list):
        if depth >= _MAX_SHAPE_DEPTH:
            return None
        # leaves (ints, mostly) without a call each: a window has ~10^5 operators' shapes
        return tuple([_as_tuple(v, depth + 1) if isinstance(v, (list, dict)) else v
                      for v in value])
    return None if isinstance(value, dict) else value


def validated(event: EventRecord) -> EventRecord:
    """The boundary check of one event's shared fields: ``name`` text of bounded length
    (``args`` are an object or none already: `event_record`). Every handler reads through it,
    so none needs its own ``isinstance``. Returns the event itself when it is well-formed (the
    common case, no copy)."""
    name = event.name
    if type(name) is str and len(name) <= MAX_NAME_CHARS:
        return event
    if type(name) is not str:
        name = "" if isinstance(name, (dict, list)) or name is None else str(name)
    return msgspec.structs.replace(event, name=name[:MAX_NAME_CHARS])


def _dim3(value: Any) -> tuple[int, int, int] | None:
    if isinstance(value, list) and len(value) == 3:
        x, y, z = value  # unrolled: a generator per kernel's grid and block cost a third of it
        if (type(x) is int and type(y) is int and type(z) is int
                and 0 <= x < 1 << 31 and 0 <= y < 1 << 31 and 0 <= z < 1 << 31):
            return (x, y, z)
    return None


def _byte_count(value: Any) -> int:
    return value if type(value) is int and 0 <= value < 1 << 63 else 0


def _host_memory(name: str) -> str:
    """``Memcpy HtoD (Pageable -> Device)`` -> "pageable"; "" when no host memory is named."""
    lowered = name.lower()
    if "pageable" in lowered:
        return "pageable"
    if "pinned" in lowered:
        return "pinned"
    return ""


@dataclass
class Collected:
    """Everything read from the events, before pids are resolved and the window is applied.

    GPU ops and sync waits carry the pid of the trace row they were drawn on (Kineto uses the
    device index there) until `kineto.loader` replaces it with the launching process's pid.
    """

    ranges: list[CpuRange] = field(default_factory=list)
    api_calls: list[ApiCall] = field(default_factory=list)
    gpu_ops: list[GpuOp] = field(default_factory=list)
    syncs: list[SyncWait] = field(default_factory=list)
    process_names: dict[int, str] = field(default_factory=dict)
    process_labels: dict[int, str] = field(default_factory=dict)
    thread_names: dict[tuple[int, int], str] = field(default_factory=dict)
    counts: Counter[str] = field(default_factory=Counter)  # whole-trace counts by kind
    gpu_rows: set[int] = field(default_factory=set)  # pids of rows that hold GPU activity


class EventMapper:
    """Feeds events one by one into a `Collected`; ``id`` of every node is its event index."""

    def __init__(self) -> None:
        self.out = Collected()
        self._strings: dict[str, str] = {}  # one copy of each name: kernel names repeat a lot
        # the trace's spelling -> `_resolve`'s answer: a handler (a plain function of the class,
        # called with the mapper: a bound method kept here would be a reference cycle, which
        # held every event mapped until Python's next full collection, issue #39), a count key
        # or None
        self._by_category: dict[str, Any] = {}
        self._shape_cache: dict[str, Any] = {}
        self._api_names: dict[str, str] = {}  # a call's name as written -> normalised, interned
        self._dtype_cache: dict[tuple[str, ...], tuple[str, ...]] = {}
        # ``Input Dims`` / ``Input type`` as JSON text (`event_record`) -> `_shapes` / `_dtypes`
        self._raw_shapes: dict[bytes, Any] = {}
        self._raw_dtypes: dict[bytes, Any] = {}
        # an operator's name -> (interned, a profiler annotation?)
        self._operator_names: dict[str, tuple[str, bool]] = {}

    def add(self, index: int, event: Any) -> None:
        """Translate one element of ``traceEvents`` as JSON decodes it (a dict, for an
        event); anything not understood is skipped."""
        record = record_of(event)
        if record is None:
            self.out.counts["not_events"] += 1
            return
        self.add_record(index, record)

    def add_record(self, index: int, event: EventRecord) -> None:
        """Translate one event decoded as a record (`event_record`); anything not understood
        is skipped."""
        phase = event.ph
        if phase != "X" and phase != "M":  # flow arrows, instants, counters: nothing to map
            return
        name = event.name
        if not (type(name) is str and len(name) <= MAX_NAME_CHARS):  # `validated`'s test
            event = validated(event)  # (its "ph" stays as it was)
        if phase == "M":
            self._metadata(event)
            return
        cat = event.cat
        if not isinstance(cat, str):
            return
        handler = self._by_category.get(cat, _UNSEEN)
        if handler is _UNSEEN:  # categories are few: each spelling is resolved once
            handler = self._resolve(cat)
            if len(self._by_category) < _MAX_CATEGORIES:  # (a hostile trace's are not kept)
                self._by_category[cat] = handler
        if handler is None:
            return
        if type(handler) is str:  # only counted
            self.out.counts[handler] += 1
            return
        # `us_to_ns` inlined for what Kineto writes, ints and "123.456" (two per event); the
        # digit limits keep the inlined results in range (anything else: `us_to_ns`).
        # (each text's digits made once: ``digits`` is read by the test and the conversion)
        ts, dur = event.ts, event.dur
        if type(ts) is int:
            start = ts * 1000
        elif (type(ts) is str and 3 < len(ts) < 20 and ts[-4] == "."
              and (digits := ts.replace(".", "", 1)).isdigit()):
            start = int(digits)
        else:
            start = us_to_ns(ts)
        if start is None or not -NS_LIMIT < start < NS_LIMIT:
            self.out.counts["no_timestamp"] += 1
            return
        if type(dur) is int:
            duration = dur * 1000 if -NS_LIMIT < dur * 1000 < NS_LIMIT else 0
        elif (type(dur) is str and 3 < len(dur) < 16 and dur[-4] == "."
                and (digits := dur.replace(".", "", 1)).isdigit()):
            duration = int(digits)
        else:
            duration = us_to_ns(dur)
            if duration is None:  # text, NaN, a list...: an instant, and the report says so
                self.out.counts["no_duration"] += 1
                duration = 0
        handler(self, index, event, start, start + max(duration, 0))

    def _resolve(self, cat: str) -> Handler | str | None:
        """Where events of category ``cat`` (as the trace spells it; compared lower-cased) go:
        a handler, a count key (GPU-side copies of CPU annotations, profiler ranges), or None."""
        lowered = cat.lower()
        if lowered == "gpu_user_annotation":  # GPU-side copy of a CPU annotation
            return "gpu_annotations"
        if lowered == "cuda_profiler_range":
            return "profiler_ranges"
        return _HANDLERS.get(lowered)

    # ----- metadata ------------------------------------------------------------------------

    def _metadata(self, event: EventRecord) -> None:
        args = event.args or NO_ARGS
        name = event.name
        pid = event.pid
        if pid is ABSENT or pid is None or pid == "":
            return
        if name == "process_name" and args.name is not ABSENT:
            self.out.process_names[as_int_id(pid)] = clean_text(args.name)
        elif name == "process_labels" and args.labels is not ABSENT:
            self.out.process_labels[as_int_id(pid)] = clean_text(args.labels)
        elif name == "thread_name" and args.name is not ABSENT:
            key = (as_int_id(pid), as_int_id(event.tid))
            self.out.thread_names[key] = clean_text(args.name)

    # ----- host side -----------------------------------------------------------------------

    def _intern(self, text: Any) -> str:
        """One copy of each name, made printable once (`clean_text`) when first seen."""
        text = str(text)
        kept = self._strings.get(text)
        if kept is None:
            kept = self._strings[text] = clean_text(text)
        return kept

    def _host_ids(self, event: EventRecord) -> tuple[int, int]:
        return as_int_id(event.pid), as_int_id(event.tid)

    def _api(self, index: int, event: EventRecord, start: int, end: int,
             layer: ApiLayer) -> None:
        raw = event.name  # a str, bounded: `validated`
        name = self._api_names.get(raw)
        if name is None:  # a trace repeats a few call names: each is normalised once
            name = self._intern(normalize(str(raw)))
            if len(self._api_names) < _MAX_CACHED:
                self._api_names[raw] = name
        pid, tid = event.pid, event.tid
        correlation = (event.args or NO_ARGS).correlation
        if type(correlation) is not int:
            correlation = -1 - index  # unique and negative: joins nothing
        self.out.api_calls.append(ApiCall(
            index, name, start, end, pid if type(pid) is int else as_int_id(pid),
            tid if type(tid) is int else as_int_id(tid), correlation, layer))
        self.out.counts["api_calls"] += 1

    def _runtime(self, index: int, event: EventRecord, start: int, end: int) -> None:
        self._api(index, event, start, end, ApiLayer.RUNTIME)

    def _driver(self, index: int, event: EventRecord, start: int, end: int) -> None:
        self._api(index, event, start, end, ApiLayer.DRIVER)

    def _range(self, index: int, event: EventRecord, start: int, end: int,
               source: RangeSource, shapes: tuple | None = None,
               dtypes: tuple | None = None) -> CpuRange:
        pid, tid = self._host_ids(event)
        rng = CpuRange(id=index, name=self._intern(event.name), start_ns=start,
                       end_ns=end, pid=pid, tid=tid, source=source, shapes=shapes,
                       dtypes=dtypes)
        self.out.ranges.append(rng)
        return rng

    def _operator(self, index: int, event: EventRecord, start: int, end: int) -> None:
        # The trace's most common event (loader-imagenet: 143k of 160k): `_range`,
        # `_host_ids` and `_intern` inlined, the range built positionally (issue #17).
        name = event.name  # a str, bounded: `validated`
        known = self._operator_names.get(name)
        if known is None:  # each operator name interned and tested once
            known = (self._intern(name), _is_profiler_annotation(name))
            if len(self._operator_names) < _MAX_CACHED:
                self._operator_names[name] = known
        if known[1]:
            self._annotation(index, event, start, end)
            return
        args = event.args or NO_ARGS
        dims, types = args.input_dims, args.input_type
        if type(dims) is msgspec.Raw:
            shapes = self._from_text(dims, self._raw_shapes, self._shapes)
        else:
            shapes = self._shapes(dims) if isinstance(dims, list) else None
        if type(types) is msgspec.Raw:
            dtypes = self._from_text(types, self._raw_dtypes, self._dtypes)
        else:
            dtypes = self._dtypes(types) if isinstance(types, list) else None
        pid, tid = event.pid, event.tid
        rng = CpuRange(index, known[0], start, end,
                       pid if type(pid) is int else as_int_id(pid),
                       tid if type(tid) is int else as_int_id(tid),
                       _OPERATOR, "", shapes, dtypes)
        self.out.ranges.append(rng)
        concrete = args.concrete_inputs
        if isinstance(concrete, list) and "attention" in known[0]:  # is_causal (graph.flops)
            rng.concrete = tuple(str(c)[:16] for c in concrete[:24])
        seq, fwd = args.sequence_number, args.fwd_thread_id
        if type(seq) is int and type(fwd) is int and seq >= 0 and fwd >= 0:
            rng.sequence, rng.fwd_thread = seq, fwd
        self.out.counts["cpu_ops"] += 1

    # Operators repeat a few shapes and dtype lists thousands of times: each distinct one is
    # converted once (the cache stops growing at `_MAX_CACHED`; a hostile trace's are not kept).
    @staticmethod
    def _from_text(raw: msgspec.Raw, cache: dict[bytes, Any],
                   convert: Callable[[list], Any]) -> Any:
        """A list-valued arg left as its JSON text (`event_record`): ``convert`` of the list it
        decodes to (None for any other value), once per distinct text. The text is one the
        batch's decoder took, so it decodes, with that decoder's values."""
        key = bytes(raw)
        found = cache.get(key, _UNSEEN)
        if found is _UNSEEN:
            value = values_decoder().decode(key)
            found = convert(value) if isinstance(value, list) else None
            if len(cache) < _MAX_CACHED:
                cache[key] = found
        return found

    def _shapes(self, dims: list) -> tuple | None:
        try:
            key = repr(dims)  # exact: equal text, equal JSON value
        except RecursionError:
            return _as_tuple(dims)
        found = self._shape_cache.get(key, _UNSEEN)
        if found is _UNSEEN:
            found = _as_tuple(dims)
            if len(self._shape_cache) < _MAX_CACHED:
                self._shape_cache[key] = found
        return found

    def _dtypes(self, types: list) -> tuple[str, ...]:
        try:
            "".join(types)  # raises unless every element is a str: then the tuple is an exact key
        except TypeError:
            return tuple(self._intern(t) for t in types)
        key = tuple(types)
        found = self._dtype_cache.get(key)
        if found is None:
            found = tuple(self._intern(t) for t in types)
            if len(self._dtype_cache) < _MAX_CACHED:
                self._dtype_cache[key] = found
        return found

    def _annotation(self, index: int, event: EventRecord, start: int, end: int) -> None:
        self._range(index, event, start, end, RangeSource.ANNOTATION)
        self.out.counts["annotations"] += 1

    def _python(self, index: int, event: EventRecord, start: int, end: int) -> None:
        # A with_stack trace's most common event (loader-imagenet-restarts: 200k of 313k):
        # `_range`, `_host_ids` and `_intern` inlined as in `_operator`.
        name = event.name  # a str, bounded: `validated`
        interned = self._strings.get(name)
        if interned is None:
            interned = self._intern(name)
        pid, tid = event.pid, event.tid
        self.out.ranges.append(CpuRange(index, interned, start, end,
                                        pid if type(pid) is int else as_int_id(pid),
                                        tid if type(tid) is int else as_int_id(tid), _PYTHON))
        self.out.counts["python_functions"] += 1

    # ----- device side ---------------------------------------------------------------------

    def _gpu_op(self, index: int, event: EventRecord, start: int, end: int,
                kind: GpuOpKind, args: Args) -> GpuOp:
        # A trace's second most common event: the op built positionally, the pid's and the
        # name's common cases inlined (`as_int_id`, `_intern`), ``args`` read once with
        # `_kernel`'s (issue #39: a rank of a job is mostly GPU ops and their launches).
        pid = event.pid
        row_pid = pid if type(pid) is int else as_int_id(pid)
        name = event.name  # a str, bounded: `validated`
        interned = self._strings.get(name)
        if interned is None:
            interned = self._intern(name)
        device, stream, correlation = args.device, args.stream, args.correlation
        op = GpuOp(index, kind, interned, start, end,
                   device if type(device) is int else row_pid,
                   stream if type(stream) is int else as_int_id(event.tid),
                   row_pid, correlation if type(correlation) is int else None)
        self.out.gpu_ops.append(op)
        self.out.gpu_rows.add(row_pid)
        return op

    def _kernel(self, index: int, event: EventRecord, start: int, end: int) -> None:
        args = event.args or NO_ARGS
        op = self._gpu_op(index, event, start, end, GpuOpKind.KERNEL, args)
        op.grid, op.block = _dim3(args.grid), _dim3(args.block)
        self.out.counts["kernels"] += 1

    def _memcpy(self, index: int, event: EventRecord, start: int, end: int) -> None:
        args = event.args or NO_ARGS
        op = self._gpu_op(index, event, start, end, GpuOpKind.MEMCPY, args)
        kind = "" if args.kind is None else str(args.kind)  # (null and absent: no kind)
        match = _COPY_KIND.search(op.name) or _COPY_KIND.search(kind)
        op.copy_kind = match.group(1) if match else ""
        op.host_memory = _host_memory(op.name)
        op.bytes = _byte_count(args.bytes)
        self.out.counts["memcpys"] += 1

    def _memset(self, index: int, event: EventRecord, start: int, end: int) -> None:
        args = event.args or NO_ARGS
        op = self._gpu_op(index, event, start, end, GpuOpKind.MEMSET, args)
        op.bytes = _byte_count(args.bytes)
        self.out.counts["memsets"] += 1

    def _sync(self, index: int, event: EventRecord, start: int, end: int) -> None:
        args = event.args or NO_ARGS
        kind_name = str(args.cuda_sync_kind or event.name or "").strip().lower()
        stream, device, correlation = args.stream, args.device, args.correlation
        row_pid = as_int_id(event.pid)
        self.out.syncs.append(SyncWait(
            id=index, kind=SYNC_KINDS.get(kind_name, SyncKind.OTHER), start_ns=start,
            end_ns=end, pid=row_pid, tid=None,
            correlation=correlation if type(correlation) is int else None,
            device=device if type(device) is int else None,
            stream=stream if type(stream) is int and stream not in _NO_STREAM else None,
        ))
        self.out.gpu_rows.add(row_pid)
        self.out.counts["syncs"] += 1


Handler = Callable[[EventMapper, int, EventRecord, int, int], None]
_HANDLERS: dict[str, Handler] = {
    "cuda_runtime": EventMapper._runtime,
    "runtime": EventMapper._runtime,
    "cuda_driver": EventMapper._driver,
    "kernel": EventMapper._kernel,
    "gpu_memcpy": EventMapper._memcpy,
    "memcpy": EventMapper._memcpy,
    "gpu_memset": EventMapper._memset,
    "memset": EventMapper._memset,
    "cpu_op": EventMapper._operator,
    "operator": EventMapper._operator,
    "user_annotation": EventMapper._annotation,
    "python_function": EventMapper._python,
    "cuda_sync": EventMapper._sync,
}
"""Category (lower-cased) -> its handler, unbound: the mapper holds no reference to itself."""
