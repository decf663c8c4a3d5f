"""Read a torch.profiler Chrome trace (``.json``, ``.json.gz``, ``.json.xz``) one event at a time.

Kineto traces reach hundreds of megabytes. Parsing the whole document at once holds the text and
every event dict together, several times the file's size; here the decompressed text is read in
chunks and the complete events ahead are decoded together, a few hundred KiB at a time (by
``msgspec``, `batch_decoder`), or one value at a time (stdlib ``json``'s C scanner via
``raw_decode``) at chunk ends and wherever the batch cannot be taken, so memory holds one chunk
plus whatever the caller keeps of each event.

JSON floats are handed over as their source text (``parse_float=str``): Kineto writes epoch
timestamps in microseconds with a fractional part (``1712195495519695.8``), which has more digits
than a float holds, and only the text converts to exact nanoseconds (`us_to_ns`).

Hostile input is bounded here, at the boundary: integers are kept as text past 40 digits (as
floats are; `us_to_ns` and the mapper's type checks then treat them as invalid, instead of
Python's int parser taking quadratic time or refusing past 4,300 digits), one JSON value may
not exceed `MAX_VALUE_CHARS` (no Kineto event comes near; a 400 MB string would otherwise be
held whole), nesting deeper than the C scanner's recursion is a one-line error, and gzip or xz input
is decompressed within the caps of `advisor.ingest.input_file`.
"""

from __future__ import annotations

import codecs
import functools
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import IO, Any, NoReturn

from advisor.errors import InputError, TraceFormatError, UnsupportedTraceError
from advisor.ingest.compression import MAGIC_BYTES, UNPACK_ERRORS, codec_of, unpack_error
from advisor.ingest.input_file import CappedReader, UnpackLimits, check_regular

CHUNK_BYTES = 1 << 22  # 4 MiB of input per read: large enough that per-chunk work is noise
MAX_VALUE_CHARS = 64 << 20  # one event (or top-level value) of the trace, as text
MAX_INT_DIGITS = 40  # longer integer literals stay text: no timestamp or id has more
MAX_NUMBER_CHARS = 64  # number text longer than this is not a time (`us_to_ns`)
BATCH_CHARS = 1 << 18  # events decoded together by one C call (`_TextReader.batch`)
CUT_TRIES = 4  # cuts `_TextReader.batch` tries before decoding one event at a time
NS_LIMIT = 1 << 63  # times must fit a signed 64-bit nanosecond count, as in every profiler
_WS = re.compile(r"[ \t\n\r]*")


def _bounded_int(text: str) -> int | str:
    return int(text) if len(text) <= MAX_INT_DIGITS else text


_DECODER = json.JSONDecoder(parse_float=str, parse_int=_bounded_int)
_FAST_DECODER = json.JSONDecoder(parse_float=str)
"""Integers parsed in C. Used for every value whose text holds no run of more than
`MAX_INT_DIGITS` digits (`_LONG_DIGITS`, searched ahead, not per value): its result is then the
same as `_DECODER`'s, without a Python call per integer (a third of the decode time)."""


@functools.cache
def batch_decoder() -> Any:
    """The decoder of `_TextReader.batch`: msgspec's (a dependency of advisor), with floats as
    their text like `_FAST_DECODER`. On Kineto's events it decodes in two thirds of the C
    scanner's time (loader-imagenet's 61 MB of JSON: 0.53 -> 0.40 s; issue #17), and where
    both take the text their values are equal, key order included; text it refuses goes to
    `_FAST_DECODER` (`batch`). Imported on first use: only Kineto traces need it."""
    import msgspec

    return msgspec.json.Decoder(float_hook=str)


_DIGITS_AS_ZERO = str.maketrans("123456789", "000000000")
_LONG_DIGITS = "0" * (MAX_INT_DIGITS + 1)
"""A long digit run, in the buffer's shadow copy where every digit reads ``0``: found by
``str.find`` (C, a few ms per chunk), where a regular expression took 40 ms a chunk."""


def _stdlib_array(text: str) -> list[Any] | None:
    """Text msgspec refuses and the stdlib takes (NaN, a lone surrogate escape), text that is
    no one array, or bad JSON: as the stdlib decodes it, or None (see `_TextReader.batch`)."""
    try:
        values, end = _FAST_DECODER.raw_decode(text)
    except (ValueError, RecursionError):  # JSONDecodeError is a ValueError
        return None
    if end != len(text):  # the cut was past the event list's end (a later key's value)
        return None
    return values


def looks_like_json(head: bytes) -> bool:
    """True when the bytes start (after a BOM and whitespace) like a JSON object or array."""
    text = head.removeprefix(codecs.BOM_UTF8).lstrip(b" \t\r\n")
    return text[:1] in (b"{", b"[")


def gzip_head(path: Path, n: int = 256) -> bytes:
    """The first decompressed bytes of a gzip (or xz) file, or b"" when they cannot be read."""
    try:
        with CappedReader(path) as f:
            return f.read(n)
    except (OSError, *UNPACK_ERRORS, InputError):
        return b""


def us_to_ns(value: Any) -> int | None:
    """Microseconds as the trace wrote them (int, or float text) -> integer nanoseconds.

    None for anything that is not a time: not a number, NaN/infinite, or out of the signed
    64-bit nanosecond range (``1e306``, ``1e999990``: checked before converting, so a huge
    exponent costs nothing)."""
    ns: int | None = None
    if type(value) is str and len(value) <= MAX_NUMBER_CHARS:  # the usual case first
        whole, dot, frac = value.partition(".")
        if len(frac) == 3 and whole.isdigit() and frac.isdigit():  # Kineto's "123.456"
            ns = int(whole + frac)
        elif whole.isdigit() and (not dot or frac.isdigit()):
            # Plain decimal: exact without Decimal; sub-nanosecond digits round half up.
            if len(frac) <= 3:  # the usual case: one conversion, nothing to round
                ns = int(whole + (frac + "000")[:3])
            else:
                ns = int(whole) * 1000 + int(frac[:3])
                ns += 1 if frac[3] >= "5" else 0
        else:
            try:
                d = Decimal(value)
                if d.is_finite() and d.adjusted() < 20:
                    ns = int((d * 1000).to_integral_value())
            except (ArithmeticError, ValueError):  # "NaN", "Infinity" and the like
                return None
    elif type(value) is int:
        ns = value * 1000
    elif isinstance(value, float) and value == value and abs(value) < NS_LIMIT / 1000:
        ns = round(value * 1000)
    if ns is None or not -NS_LIMIT < ns < NS_LIMIT:
        return None
    return ns


@dataclass
class TraceDocument:
    """What the top level of the trace holds besides the events (read as the events stream)."""

    metadata: dict[str, Any] = field(default_factory=dict)
    event_count: int = 0
    has_event_list: bool = False


class _TextReader:
    """Decoded text of the file in a sliding buffer, refilled on demand."""

    def __init__(self, path: Path, raw: IO[bytes] | CappedReader, chunk_bytes: int,
                 records: Any = None) -> None:
        self.path = path
        self._raw = raw
        self._chunk_bytes = chunk_bytes
        self._records = records  # a typed batch decoder (`iter_event_batches`), or None
        self.codec = raw.codec if isinstance(raw, CappedReader) else None
        self._started = False  # text was decoded: bad bytes now mean a corrupt trace
        self._decoder = codecs.getincrementaldecoder("utf-8-sig")()
        self.buf = ""
        self.pos = 0
        self.eof = False
        self._zeros = ""  # buf with every digit as "0" (`_DIGITS_AS_ZERO`), kept beside it
        self._long_at = -1  # where a long digit run ahead starts in buf (-1: none found)
        self._clear_to = 0  # no long digit run starts in buf before this (searched so far)

    def fill(self) -> bool:
        """Append the next chunk; False at end of file."""
        if self.eof:
            return False
        try:
            data = self._raw.read(self._chunk_bytes)
            text = self._decoder.decode(data, final=not data)
        except UNPACK_ERRORS as e:  # gzip or xz stream cut short or corrupt
            raise unpack_error(self.path, self.codec or "gzip", e) from e
        except UnicodeDecodeError as e:
            if not self._started and not looks_like_json(data[:256]):
                raise self.not_json() from e
            raise TraceFormatError(f"{self.path}: corrupt trace: bytes that are not UTF-8 text "
                                   f"in the JSON") from e
        except OSError as e:
            raise InputError(f"{self.path}: cannot read ({e.strerror or e})") from e
        if not data:
            self.eof = True
        self._started = True
        self._clear_to = max(0, self._clear_to - self.pos)  # buf is re-based on pos
        self._long_at = self._long_at - self.pos if self._long_at >= self.pos else -1
        self.buf = self.buf[self.pos :] + text
        self._zeros = self._zeros[self.pos :] + text.translate(_DIGITS_AS_ZERO)
        self.pos = 0
        return bool(data) or bool(text)

    def not_json(self) -> UnsupportedTraceError:
        what = f"a {self.codec} file that does not hold JSON" if self.codec else "not JSON"
        return UnsupportedTraceError(f"{self.path}: {what}, so not a torch.profiler trace")

    def peek(self) -> str | None:
        """The next non-whitespace character (not consumed), None at end of file."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.fill():
                return None

    def take(self, expected: str, where: str) -> None:
        char = self.peek()
        if char != expected:
            self.fail(where)
        self.pos += 1

    def closed(self, close: str, where: Callable[[], str]) -> bool:
        """After a member of an object or array: True past its closing ``close``, False past the
        comma before the next member; anything else is bad JSON (``where`` is called only then:
        this runs once per event)."""
        char = self.peek()
        if char == close or char == ",":
            self.pos += 1
            return char == close
        self.fail(where())

    def value(self, where: str) -> Any:
        """Decode one JSON value; a value cut by the chunk boundary is retried with more text."""
        while True:
            if self.peek() is None:
                self.fail(where)
            try:
                value, end = self._decode()
            except json.JSONDecodeError:
                if len(self.buf) - self.pos > MAX_VALUE_CHARS:
                    raise TraceFormatError(
                        f"{self.path}: a value {where} is longer than "
                        f"{MAX_VALUE_CHARS >> 20} MiB of text: not a torch.profiler event"
                    ) from None
                if self.fill():
                    continue
                self.fail(where)
            except RecursionError:
                raise TraceFormatError(f"{self.path}: malformed JSON {where}: nested too "
                                       "deeply") from None
            if end == len(self.buf) and self.fill():
                continue  # a number may go on in the next chunk
            self.pos = end
            return value

    def batch(self) -> list[Any] | None:
        """The complete events ahead of ``pos`` (at most `BATCH_CHARS` of text), decoded by one
        C call as one array (`batch_decoder`); ``pos`` is left on the comma after the last.

        Decoding one event per call paid as much in Python around the scanner (whitespace,
        separators, the long-digit check) as the scanner itself. The cut is the last ``},``
        in reach that an event follows, before any long digit run; it may still lie inside a
        string or an event, or past the list's end: the first two leave ``[`` + text + ``]``
        unbalanced (it fails to parse), the last parses short of the text. Then the cut
        before it is tried, up to `CUT_TRIES` cuts: C++ kernel names hold ``},`` (a lambda's
        ``{lambda(int)#1},``), and when the last ``},`` in reach was one of those, every
        event after it had been decoded one at a time until the window passed it (a 1 MB
        DDP trace: 1,679 failed batches, 1.8 s to read). When no cut parses, as for nesting
        too deep or any malformed text, None is returned and the caller decodes one value at a
        time as before, with the same values and the same errors.

        A batch's reach of text is read first when less is left in the buffer: an event that
        the chunk's end cut was otherwise decoded alone, after a failed parse of the cut text
        whose error counted the newlines of the whole buffer for its line number (``json``'s
        ``JSONDecodeError``: about 3% of reading loader-imagenet's trace; issue #39).
        """
        if not self.eof and len(self.buf) - self.pos < BATCH_CHARS:
            self.fill()
        buf, pos = self.buf, self.pos
        long_at = self._long_run_ahead()
        end = pos + BATCH_CHARS if long_at is None else min(pos + BATCH_CHARS, long_at)
        for _ in range(CUT_TRIES):
            cut = buf.rfind("},", pos, end)
            if cut < pos:
                return None
            end = cut  # the next try, if any, cuts before this one
            after = _WS.match(buf, cut + 2).end()
            if after < len(buf) and buf[after] != "{":
                continue  # no event starts after this comma: it is inside a string
            values = self._decode_batch("[" + buf[pos:cut + 1] + "]", self._records)
            if values is not None:
                self.pos = cut + 1
                return values
        return None

    @staticmethod
    def _decode_batch(text: str, records: Any = None) -> list[Any] | None:
        """``text`` as one array, or None when it is not one (see `batch`). With ``records``
        (a typed decoder), its records where it takes every element, else the values."""
        if records is not None:
            import msgspec  # already imported: ``records`` is a msgspec decoder

            try:
                return records.decode(text)
            except msgspec.ValidationError:  # JSON, but not all events: decoded as values
                pass
            except (ValueError, RecursionError):  # not JSON msgspec takes (as below)
                return _stdlib_array(text)
        try:
            return batch_decoder().decode(text)
        except (ValueError, RecursionError):  # msgspec.DecodeError is a ValueError
            return _stdlib_array(text)

    def _decode(self) -> tuple[Any, int]:
        """`_DECODER.raw_decode` at ``pos``, through `_FAST_DECODER` where that is the same."""
        long_at = self._long_run_ahead()
        if long_at is None:
            return _FAST_DECODER.raw_decode(self.buf, self.pos)
        try:
            value, end = _FAST_DECODER.raw_decode(self.buf, self.pos)
        except json.JSONDecodeError:
            raise
        except ValueError:  # an integer past Python's digit limit: the long run is in it
            return _DECODER.raw_decode(self.buf, self.pos)
        if end <= long_at:
            return value, end
        return _DECODER.raw_decode(self.buf, self.pos)  # the value holds the long run

    def _long_run_ahead(self) -> int | None:
        """Where the next run of more than `MAX_INT_DIGITS` digits at or after ``pos`` starts,
        None if the text read so far has none. Each stretch of text is searched once (a run
        cut by the buffer's end is found when the next chunk arrives)."""
        if self._long_at >= self.pos:
            return self._long_at
        if self._clear_to == len(self.buf):
            return None  # searched to the end already; a run cut there completes only on fill
        found = self._zeros.find(_LONG_DIGITS, max(self.pos, self._clear_to - MAX_INT_DIGITS))
        if found >= 0:
            self._long_at = self._clear_to = found
            return found
        self._long_at, self._clear_to = -1, len(self.buf)
        return None

    def fail(self, where: str) -> NoReturn:
        """Raise the error for bad JSON at ``pos``: truncated if the rest was cut, else malformed."""
        while len(self.buf) - self.pos <= MAX_VALUE_CHARS and self.fill():
            pass  # an error path: reading the rest is what tells a cut file from a corrupt one
        if self._cut_short():
            raise TraceFormatError(f"{self.path}: truncated JSON: the file ends {where}")
        raise TraceFormatError(f"{self.path}: malformed JSON {where}")

    def _cut_short(self) -> bool:
        """True when the text left is empty or parses right up to the end of the file."""
        if _WS.match(self.buf, self.pos).end() >= len(self.buf):
            return True
        try:
            _DECODER.raw_decode(self.buf, self.pos)
        except json.JSONDecodeError as e:
            return e.pos >= len(self.buf) - 1 or e.msg.startswith("Unterminated string")
        except RecursionError:
            return False
        return False


def open_binary(path: Path, limits: UnpackLimits | None = None) -> IO[bytes] | CappedReader:
    """The file's bytes, decompressed (within the caps) when it is gzip or xz; read-only."""
    check_regular(path)
    try:
        with path.open("rb") as f:
            magic = f.read(MAGIC_BYTES)
        return CappedReader(path, limits) if codec_of(magic) else path.open("rb")
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror or e})") from e


def iter_events(path: Path, doc: TraceDocument, chunk_bytes: int = CHUNK_BYTES,
                limits: UnpackLimits | None = None) -> Iterator[Any]:
    """Yield every element of ``traceEvents`` (or of a top-level array) in file order.

    Top-level keys other than ``traceEvents`` land in ``doc.metadata`` as they are passed;
    ones written after the events (``displayTimeUnit``, ``traceName``) are there only once
    the generator is exhausted.
    """
    for batch in iter_event_batches(path, doc, chunk_bytes, limits):
        yield from batch


def iter_event_batches(path: Path, doc: TraceDocument, chunk_bytes: int = CHUNK_BYTES,
                       limits: UnpackLimits | None = None,
                       records: Any = None) -> Iterator[list[Any]]:
    """`iter_events` as lists of consecutive events (the batches the C scanner decoded, or
    one event): a caller looping over each list skips resuming three nested generators per
    event (a tenth of reading a Kineto trace's events, issue #17).

    ``records``: a msgspec decoder of a JSON array into typed records
    (`advisor.ingest.kineto.event_record.records_decoder`); a batch it decodes is a list of its
    records, any other batch (one it refuses by type, one decoded one value at a time) a list of
    the values as without it. A batch holds one kind or the other, never both."""
    with open_binary(path, limits) as raw:
        reader = _TextReader(path, raw, chunk_bytes, records)
        first = reader.peek()
        if first == "[":
            reader.pos += 1
            doc.has_event_list = True
            yield from _array(reader, doc)
        elif first == "{":
            reader.pos += 1
            yield from _object(reader, doc)
        else:
            raise reader.not_json()
        if reader.peek() is not None:
            raise TraceFormatError(f"{path}: malformed JSON: text follows the end of the trace")


def _object(reader: _TextReader, doc: TraceDocument) -> Iterator[list[Any]]:
    if reader.peek() == "}":
        reader.pos += 1
        return
    while True:
        key = reader.value("inside the top-level object")
        if not isinstance(key, str):
            reader.fail("inside the top-level object")
        reader.take(":", "inside the top-level object")
        if key == "traceEvents" and reader.peek() == "[":
            reader.pos += 1
            doc.has_event_list = True
            yield from _array(reader, doc)
        else:
            doc.metadata[key] = reader.value(f"in the value of {key!r}")
        if reader.closed("}", lambda: "inside the top-level object"):
            return


def _array(reader: _TextReader, doc: TraceDocument) -> Iterator[list[Any]]:
    if reader.peek() == "]":
        reader.pos += 1
        return
    while True:
        if reader.peek() != "{" or (batch := reader.batch()) is None:
            yield [reader.value(f"inside the trace events (after {doc.event_count} events)")]
            doc.event_count += 1
        else:
            yield batch  # (counted after: nothing reads the count mid-batch)
            doc.event_count += len(batch)
        if reader.closed("]", lambda: f"inside the trace events (after {doc.event_count} events)"):
            return
