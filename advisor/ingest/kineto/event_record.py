"""The fields of a Kineto event that `event_mapper` reads, as one struct decoded in C.

Decoding each event into a dict built a Python object for every key and value of the event,
and most are never read: flow arrows, an operator's ``External id``, ``Record function id``,
``Ev Idx``, its input strides. msgspec decodes a batch of events straight into `EventRecord`
structs (`records_decoder`), skipping every other key in C, and the mapper reads attributes
instead of ``dict.get`` (issue #39: HTA's df_index_resolver trace, 216,092 events, read in
about two thirds of the time). msgspec is already advisor's batch decoder
(`event_stream.batch_decoder`); its typed decode keeps its untyped one's values for the fields
kept, floats as their text included (``float_hook=str``: the fields are typed ``Any``). An
operator's ``Input Dims`` and ``Input type`` stay their JSON text (`msgspec.Raw`) until the
mapper converts each distinct text once, with that same untyped decoder.

Only the shape of the event is typed: an event that is not a JSON object, or whose ``args`` is
present but not an object, fails the typed decode of its batch, which is then decoded as dicts
as before, and `record_of` turns each dict into the record that the typed decode would have
given (or None for a value that is no event), with ``args`` that are not an object read as
none, as `event_mapper.validated` did; its ``Input Dims`` and ``Input type`` are the decoded
values, not their text.
"""

from __future__ import annotations

import functools
from typing import Any

import msgspec


class _Absent:
    """The default of a field whose absence the mapper tells from JSON ``null``."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()
"""A key the event did not have (a metadata event's ``pid`` or ``args.name``, where a
``null`` value and no key at all were read differently)."""


class Args(msgspec.Struct, frozen=True):
    """The ``args`` keys the mapper reads (any other key is skipped by the decoder)."""

    correlation: Any = None
    # An operator's input shapes and dtypes, left as their JSON text by the typed decode (a
    # window repeats a few of them: the mapper converts each distinct text once); values where
    # the event was decoded as a dict.
    input_dims: msgspec.Raw = msgspec.field(default=None, name="Input Dims")
    input_type: msgspec.Raw = msgspec.field(default=None, name="Input type")
    concrete_inputs: Any = msgspec.field(default=None, name="Concrete Inputs")
    sequence_number: Any = msgspec.field(default=None, name="Sequence number")
    fwd_thread_id: Any = msgspec.field(default=None, name="Fwd thread id")
    device: Any = None
    stream: Any = None
    grid: Any = None
    block: Any = None
    kind: Any = None
    bytes: Any = None
    cuda_sync_kind: Any = None
    name: Any = ABSENT  # metadata events: the process or thread name
    labels: Any = ABSENT  # metadata events: the process labels


NO_ARGS = Args()
"""An event without ``args`` (or with ``args`` that are not an object): every key absent."""


class EventRecord(msgspec.Struct):
    """One element of ``traceEvents``: the keys the mapper reads, with ``dict.get``'s defaults
    the mapper used (``name`` "", ``dur`` 0, ``tid`` 0; ``pid`` `ABSENT`, which a handler
    reads as 0 and a metadata event as no process)."""

    ph: Any = None
    cat: Any = None
    name: Any = ""
    ts: Any = None
    dur: Any = 0
    pid: Any = ABSENT
    tid: Any = 0
    args: Args | None = None


@functools.cache
def records_decoder() -> msgspec.json.Decoder:
    """A JSON array of events -> a list of `EventRecord` (floats as their text, as
    `event_stream`'s untyped decoders give them); a batch it refuses by type raises
    `msgspec.ValidationError`."""
    return msgspec.json.Decoder(list[EventRecord], float_hook=str)


def _args_of(args: Any) -> Args | None:
    if type(args) is not dict:  # absent, null, or not an object: no args (`validated`)
        return None
    get = args.get
    return Args(get("correlation"), get("Input Dims"), get("Input type"), get("Concrete Inputs"),
                get("Sequence number"), get("Fwd thread id"), get("device"), get("stream"),
                get("grid"), get("block"), get("kind"), get("bytes"), get("cuda_sync_kind"),
                get("name", ABSENT), get("labels", ABSENT))


def record_of(event: Any) -> EventRecord | None:
    """The record of an event decoded as a dict (the stdlib path, and callers that hold
    dicts), equal to what `records_decoder` gives for the same text; None for a value that is
    not a JSON object (not an event)."""
    if not isinstance(event, dict):
        return None
    get = event.get
    return EventRecord(get("ph"), get("cat"), get("name", ""), get("ts"), get("dur", 0),
                       get("pid", ABSENT), get("tid", 0), _args_of(get("args")))
