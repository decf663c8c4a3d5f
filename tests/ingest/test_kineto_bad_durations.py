"""Events whose duration is not a number (text, NaN, a list) are read as instants, and the report
says how many: a fuzzing pass gave every event of a real trace ``"dur": "abc"`` and the analysis
ended with exit 0, GPU busy 0 ms and not a word. Real trace: the host-sync scenario's capture."""

from __future__ import annotations

import gzip
import json

import pytest

from advisor.ingest.base import LoadOptions, load_trace
from advisor.ingest.kineto.event_mapper import _HANDLERS
from tests.conftest import SCENARIOS

TRACE = SCENARIOS / "host-sync" / "bad" / "trace.json.gz"


def _with_durations(tmp_path, value, every: int = 1):
    doc = json.loads(gzip.decompress(TRACE.read_bytes()))
    changed = 0
    for i, e in enumerate(doc["traceEvents"]):
        if e.get("ph") == "X" and "dur" in e and i % every == 0:
            e["dur"] = value
            # the events the reader maps (kernels, calls, operators...); the others it skips
            changed += str(e.get("cat", "")).lower() in _HANDLERS
    out = tmp_path / "trace.json"
    out.write_text(json.dumps(doc))
    return out, changed


@pytest.mark.parametrize("value", ["abc", [1], {"us": 3}, True])
def test_durations_that_are_not_numbers_are_counted_in_a_note(tmp_path, value):
    path, changed = _with_durations(tmp_path, value, every=7)
    notes = load_trace(path, LoadOptions()).info.notes
    note = next(n for n in notes if "duration that is not a number" in n)
    assert int(note.split()[0]) == changed > 0


def test_a_trace_with_numeric_durations_has_no_such_note():
    notes = load_trace(TRACE, LoadOptions()).info.notes
    assert not any("duration that is not a number" in n for n in notes)
