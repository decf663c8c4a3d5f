"""Kineto events decoded straight into records (`advisor.ingest.kineto.event_record`) read as
the dicts they replaced: the typed decode and `record_of` of the same text agree, the mapper
builds the same nodes from either, and a batch the typed decode refuses is read as values."""

from __future__ import annotations

import dataclasses
import gzip
import json

import msgspec
import pytest

from advisor.ingest.base import LoadOptions, load_trace
from advisor.ingest.kineto.event_mapper import EventMapper
from advisor.ingest.kineto.event_record import ABSENT, EventRecord, record_of, records_decoder
from advisor.ingest.kineto.event_stream import TraceDocument, batch_decoder, iter_event_batches
from tests.conftest import SCENARIOS

TRACE = SCENARIOS / "pageable-memcpy" / "bad" / "trace.json.gz"  # shapes, kernels, copies

EDGE_EVENTS = [
    {"ph": "M", "name": "process_name", "args": {"name": "orphan"}},  # no pid: no process
    {"ph": "M", "name": "process_name", "pid": 99992, "args": {"name": None}},  # "None"
    {"ph": "M", "name": "process_name", "pid": 99991, "args": {}},  # no name: nothing
    {"ph": "M", "name": "thread_name", "pid": 99991, "tid": "7", "args": {"name": "main"}},
    {"ph": "X", "cat": "kernel", "name": "k", "ts": "1.5", "args": None},
    {"ph": "X", "cat": "cpu_op", "name": 17, "ts": 3, "dur": "2.250",
     "args": {"Input Dims": [[2, 3], [], [1.5]], "Input type": ["float", 1], "other": [1]}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::x", "ts": 5,
     "args": {"Input Dims": None, "Input type": "float"}},  # not lists: none
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy", "ts": 1, "pid": None,
     "args": {"kind": None, "bytes": 8}},
    {},
]


def _values(text: str) -> list:
    return json.loads(text, parse_float=str)  # as the stream's untyped decoders give them


def _trace_events() -> list:
    return _values(gzip.decompress(TRACE.read_bytes()).decode())["traceEvents"]


def _edge_events() -> list:
    return _values(json.dumps(EDGE_EVENTS))  # as decoded: floats as their text


def _decoded(record: EventRecord | None) -> EventRecord | None:
    """``record`` with the args kept as JSON text (`msgspec.Raw`) decoded, as a dict has them."""
    if record is None or record.args is None:
        return record
    text = {f: getattr(record.args, f) for f in ("input_dims", "input_type")
            if type(getattr(record.args, f)) is msgspec.Raw}
    args = msgspec.structs.replace(record.args, **{
        f: batch_decoder().decode(bytes(raw)) for f, raw in text.items()})
    return msgspec.structs.replace(record, args=args)


def test_typed_decode_equals_the_record_of_each_dict():
    events = _trace_events() + _edge_events()
    text = json.dumps(events)
    typed = records_decoder().decode(text)
    assert any(r.args is not None and type(r.args.input_dims) is msgspec.Raw for r in typed)
    assert [_decoded(r) for r in typed] == [record_of(e) for e in _values(text)]


def test_record_defaults_are_the_dict_reads_defaults():
    r = record_of({"ph": "X"})
    assert (r.name, r.dur, r.tid, r.pid, r.args) == ("", 0, 0, ABSENT, None)
    assert record_of({"ph": "X", "args": [1]}).args is None  # not an object: no args
    assert record_of([1]) is None and record_of(3) is None  # not events


def _mapped(events: list) -> dict:
    mapper = EventMapper()
    for i, e in enumerate(events):
        (mapper.add_record if type(e) is EventRecord else mapper.add)(i, e)
    out = mapper.out
    return {f.name: getattr(out, f.name) for f in dataclasses.fields(out)}


def test_the_mapper_reads_decoded_records_as_it_reads_dicts():
    events = _trace_events() + _edge_events()
    typed = records_decoder().decode(json.dumps(events))
    assert all(type(r) is EventRecord for r in typed)
    by_dict = _mapped([*events, 5, "x"])
    assert by_dict == _mapped([*typed, 5, "x"])
    assert by_dict["ranges"] and by_dict["gpu_ops"] and by_dict["counts"]["not_events"] == 2
    # a metadata event's absent pid or name is no process, a null name is one
    names = by_dict["process_names"]
    assert by_dict["thread_names"][(99991, 7)] == "main"
    assert 99991 not in names and names[99992] == "None" and "orphan" not in names.values()


def test_a_batch_with_args_that_are_not_an_object_is_read_as_values(tmp_path):
    events = _trace_events()
    i = next(i for i, e in enumerate(events) if e.get("cat") == "kernel")
    bad, none = [dict(e) for e in events], [dict(e) for e in events]
    bad[i]["args"], none[i]["args"] = [1, 2], {}
    paths = []
    for name, doc in (("bad", bad), ("none", none)):
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps({"traceEvents": doc}))
    kinds = {type(b[0]) for b in iter_event_batches(paths[0], TraceDocument(),
                                                    records=records_decoder())}
    assert kinds == {EventRecord, dict}  # the refused batch as values, the others as records
    a, b = (load_trace(p, LoadOptions()) for p in paths)
    assert a.gpu_ops == b.gpu_ops and a.api_calls == b.api_calls and a.ranges == b.ranges


@pytest.mark.parametrize("chunk_bytes", [257, 1 << 22])
def test_records_and_values_stream_the_same_events(chunk_bytes):
    as_values = [e for b in iter_event_batches(TRACE, TraceDocument(), chunk_bytes) for e in b]
    batches = list(iter_event_batches(TRACE, TraceDocument(), chunk_bytes,
                                      records=records_decoder()))
    as_records = [_decoded(e) if type(e) is EventRecord else record_of(e)
                  for b in batches for e in b]
    assert as_records == [record_of(e) for e in as_values]
