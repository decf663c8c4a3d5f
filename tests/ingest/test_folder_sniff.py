"""A folder's JSON files are told apart by their head, read only as far as `traceEvents`.

`advisor.ingest.folder` read a whole MiB (decompressed) of every JSON file of a job folder to
find the key; it now stops at the key (issue #39). The verdicts must be the ones of a whole-MiB
read: the key anywhere in the first MiB (split between two reads included) makes a trace, the
key after it does not, and advisor's own result files are still recognised.
"""

from __future__ import annotations

import gzip
import io
import json

import pytest

from advisor.ingest import folder
from advisor.ingest.folder import SNIFF_BYTES, TRACE_KEY, _head_to_key, skip_reason


class CountingReader(io.BytesIO):
    """A file that remembers how much was read of it."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.taken = 0

    def read(self, n: int | None = -1) -> bytes:
        piece = super().read(n)
        self.taken += len(piece)
        return piece


@pytest.mark.parametrize("at", [0, 10, folder._FIRST_READ - 5, folder._FIRST_READ - 13,
                                3 * folder._FIRST_READ + 1, SNIFF_BYTES - len(TRACE_KEY)])
def test_a_key_inside_the_first_mib_is_found_and_reading_stops_there(at):
    data = b" " * at + TRACE_KEY + b":[]" + b" " * (2 * SNIFF_BYTES)
    f = CountingReader(data)
    head = _head_to_key(f)
    assert TRACE_KEY in head
    assert head == data[:len(head)]
    assert f.taken < at + len(TRACE_KEY) + 2 * max(at, folder._FIRST_READ)  # not the whole MiB
    assert (TRACE_KEY in head) == (TRACE_KEY in data[:SNIFF_BYTES])


@pytest.mark.parametrize("at", [SNIFF_BYTES - len(TRACE_KEY) + 1, SNIFF_BYTES + 100])
def test_a_key_past_the_first_mib_is_not_seen(at):
    data = b" " * at + TRACE_KEY + b":[]"
    head = _head_to_key(CountingReader(data))
    assert head == data[:SNIFF_BYTES]
    assert TRACE_KEY not in head


def test_short_files_are_read_whole():
    data = b'{"advisor_version": "1", "schema_version": 2}'
    assert _head_to_key(CountingReader(data)) == data


def test_verdicts_on_real_files(tmp_path):
    late = tmp_path / "late.json.gz"  # a document whose key comes after 1 MiB of metadata
    late.write_bytes(gzip.compress(b'{"meta": "' + b"x" * SNIFF_BYTES + b'", "traceEvents": []}'))
    early = tmp_path / "early.json.gz"
    early.write_bytes(gzip.compress(b'{"traceEvents": [' + b'{"ph": "X"},' * 200_000 + b'{}]}'))
    own = tmp_path / "analysis.json"
    own.write_text(json.dumps({"advisor_version": "0.1", "schema_version": "1.0", "x": []}))
    assert skip_reason(early) is None
    assert skip_reason(late) == "not a trace"
    assert skip_reason(own) == "advisor's own file"
