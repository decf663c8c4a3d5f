"""The streaming reader under ChromeTraceSource: same events as a whole-file parse, whatever
the chunk size, and exact nanoseconds from the trace's microsecond text."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from advisor.ingest.kineto.event_stream import TraceDocument, iter_events, us_to_ns

TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
SMALL = TRACES / "hta" / "critical_path" / "cuda_event_sync" / "event_sync_trace.json.gz"
ROCM = TRACES / "hta" / "amd_trace" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz"

pytestmark = pytest.mark.skipif(
    not SMALL.exists(), reason=f"shared traces not found at {TRACES} (they sit beside the "
                               f"repository)")


@pytest.mark.parametrize("chunk_bytes", [1, 7, 4096, 1 << 22])
@pytest.mark.parametrize("path", [SMALL, ROCM], ids=["event_sync", "rocm"])
def test_streamed_events_equal_a_whole_file_parse(path, chunk_bytes):
    with gzip.open(path) as f:
        whole = json.load(f, parse_float=str)
    doc = TraceDocument()
    events = list(iter_events(path, doc, chunk_bytes=chunk_bytes))
    assert events == whole["traceEvents"]
    assert doc.event_count == len(events) and doc.has_event_list
    # keys written after the events are read too
    assert doc.metadata == {k: v for k, v in whole.items() if k != "traceEvents"}


def test_top_level_array_form_is_streamed(tmp_path):
    with gzip.open(SMALL) as f:
        events = json.load(f, parse_float=str)["traceEvents"]
    path = tmp_path / "array.json"
    path.write_text(json.dumps(events))
    doc = TraceDocument()
    assert list(iter_events(path, doc, chunk_bytes=64)) == events


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        (1695835542514261, 1695835542514261000),  # whole microseconds as a JSON int
        ("1712195495519695.8", 1712195495519695800),  # beyond float precision
        ("1419247332972.313", 1419247332972313),
        ("63.813", 63813),
        ("1.2345", 1235),  # sub-nanosecond digits round half up
        ("1e3", 1_000_000),
        ("-2.5", -2500),
        ("NaN", None),
        (None, None),
    ],
)
def test_microseconds_to_exact_nanoseconds(text, ns):
    assert us_to_ns(text) == ns


@pytest.mark.parametrize("chunk_bytes", [1, 5, 64, 4096, 1 << 22])
def test_integers_past_the_digit_cap_stay_text_wherever_they_fall(tmp_path, chunk_bytes):
    """Values are decoded with C-parsed integers except where the text holds a run of more
    than 40 digits (`_LONG_DIGITS`): those values keep such integers as text, as before, at
    any chunk boundary; digits inside strings and floats change nothing."""
    events = []
    for i in range(400):
        args: dict = {"i": i, "t": 1712195495519695 + i}
        if i % 37 == 0:
            args["big"] = int("9" * (38 + i % 7))  # 38..44 digits: some over the cap
        if i % 53 == 0:
            args["name"] = "7" * (40 + i % 3)  # a long digit run inside a string
        if i % 61 == 0:
            args["f"] = float("1e30")
        events.append({"ph": "X", "name": f"k{i}", "ts": i, "dur": 1, "args": args})
    text = json.dumps({"traceEvents": events, "after": int("1" * 45)})
    path = tmp_path / "digits.json"
    path.write_text(text)
    doc = TraceDocument()
    got = list(iter_events(path, doc, chunk_bytes=chunk_bytes))
    capped = json.loads(text, parse_float=str,
                        parse_int=lambda s: int(s) if len(s) <= 40 else s)
    assert got == capped["traceEvents"]
    assert doc.metadata["after"] == "1" * 45
    over_cap = sum(1 for i in range(400) if i % 37 == 0 and 38 + i % 7 > 40)
    assert over_cap and sum(1 for e in got if isinstance(e["args"].get("big"), str)) == over_cap


@pytest.mark.parametrize("chunk_bytes", [5, 300, 1 << 22])
def test_batched_decoding_cuts_only_between_events(tmp_path, chunk_bytes):
    """Events are decoded many at a time, cut at a ``},`` (`_TextReader.batch`). A ``},``
    inside a string, inside an event, or after the event list (a later key's object) must not
    split anything: the events and the keys after them are those of a whole-file parse."""
    events = [{"ph": "X", "name": f"a}},{{b{i}", "args": {"x": {"y": [1, {"z": 2}]}, "k": i},
               "ts": f"{i}.5", "dur": 1} for i in range(200)]
    events[57]["args"]["long"] = int("9" * 60)  # a long digit run inside a batch
    doc_in = {"traceEvents": events, "after": {"p": 1}, "more": [{"q": 2}, 3]}
    for sep in ((",", ":"), (", ", ": ")):
        path = tmp_path / "compact.json"
        path.write_text(json.dumps(doc_in, separators=sep))
        doc = TraceDocument()
        got = list(iter_events(path, doc, chunk_bytes=chunk_bytes))
        expected = json.loads(path.read_text(), parse_float=str,
                              parse_int=lambda t: int(t) if len(t) <= 40 else t)
        assert got == expected["traceEvents"]
        assert got[57]["args"]["long"] == "9" * 60
        assert doc.event_count == 200
        assert doc.metadata == {"after": {"p": 1}, "more": [{"q": 2}, 3]}


def test_kernel_names_holding_a_cut_do_not_fall_back_to_one_event_at_a_time():
    """C++ kernel names hold ``},`` (``{lambda(int)#1},``). When the last one in a batch's
    reach was inside such a name, the batch failed and so did the next ones, event after
    event, until the window passed it: this 13.5 MB (text) DDP rank trace took 3,400 batches
    (1,679 failed decodes of up to 256 KiB each; 1.8 s to read) before the cut stepped back to
    an event boundary. Its events are those of a whole-file parse either way."""
    from advisor.ingest.kineto.event_stream import BATCH_CHARS, iter_event_batches

    path = Path(__file__).resolve().parents[2] / (
        "fixtures/jobs/h200x2-ddp-b32/torch/accum-nosync/rank0.json.gz")
    text = gzip.decompress(path.read_bytes()).decode()
    assert "#1}," in text  # the names that hold a cut
    doc = TraceDocument()
    batches = list(iter_event_batches(path, doc))
    assert [e for b in batches for e in b] == json.loads(text, parse_float=str)["traceEvents"]
    assert len(batches) < 3 * len(text) // BATCH_CHARS, len(batches)
