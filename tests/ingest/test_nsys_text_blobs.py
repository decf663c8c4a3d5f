"""Text columns that hold BLOBs: SQLite's loose typing lets a damaged or hand-edited export store
an NVTX range's text as bytes, which the connection's text factory never decodes. A fuzzing pass
(2026-12-03) found ``UPDATE NVTX_EVENTS SET text = x'00ff'`` ending `advisor analyze` in a
traceback; a BLOB now reads as UTF-8 with bad bytes replaced. Real export: the host-sync
scenario's nsys capture."""

from __future__ import annotations

import shutil
import sqlite3

from advisor.ingest.base import LoadOptions, load_trace
from advisor.ingest.nsys.schema import as_text
from tests.conftest import SCENARIOS

EXPORT = SCENARIOS / "host-sync" / "bad" / "nsys.sqlite.gz"


def _mutated(unpacked, tmp_path, sql: str):
    out = tmp_path / "export.sqlite"
    shutil.copy(unpacked(EXPORT), out)
    con = sqlite3.connect(out)
    con.execute(sql)
    con.commit()
    con.close()
    return out


def test_nvtx_text_stored_as_blobs_reads_as_the_same_ranges(unpacked, tmp_path):
    whole = load_trace(unpacked(EXPORT), LoadOptions())
    blobs = load_trace(_mutated(unpacked, tmp_path, "UPDATE NVTX_EVENTS SET text = CAST(text AS BLOB) "
                                "WHERE text IS NOT NULL"), LoadOptions())
    assert [(r.name, r.start_ns) for r in blobs.ranges] == [(r.name, r.start_ns) for r in whole.ranges]
    assert [s.name for s in blobs.steps] == [s.name for s in whole.steps] != []


def test_undecodable_blob_text_loads_with_replacement_characters(unpacked, tmp_path):
    graph = load_trace(_mutated(unpacked, tmp_path, "UPDATE NVTX_EVENTS SET text = x'00ff'"),
                       LoadOptions())
    assert any(r.name == "\x00\ufffd" for r in graph.ranges)


def test_as_text_reads_every_sqlite_type():
    assert [as_text(v) for v in ("a", b"b\xff", None, 7, 1.5)] == ["a", "b\ufffd", "", "7", "1.5"]
