"""Schema facts the nsys loader relies on, checked on the real exports, and the support matrix."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from advisor.ingest.base import load_trace
from advisor.ingest.nsys import schema as S
from advisor.ingest.nsys.export_file import connect_read_only

REPO = Path(__file__).parents[2]
TRACES = REPO.parent / "shared" / "traces"
MATRIX = REPO / "fixtures" / "support-matrix.md"
EXPORTS = sorted(TRACES.rglob("*.sqlite")) if TRACES.is_dir() else []

needs_traces = pytest.mark.skipif(
    not EXPORTS, reason=f"real traces not found at {TRACES} (the shared/ folder)"
)


def open_schema(path: Path) -> S.NsysSchema:
    return S.NsysSchema(connect_read_only(path, path), path)


@needs_traces
@pytest.mark.parametrize("path", EXPORTS, ids=lambda p: p.relative_to(TRACES).as_posix())
def test_global_ids_decode_to_the_os_pids_and_tids(path):
    schema = open_schema(path)
    conn = schema.conn
    pids = {pid for pid, in conn.execute("SELECT pid FROM PROCESSES")}
    names = {(S.pid_of(g), p) for g, p in conn.execute("SELECT globalPid, pid FROM PROCESSES")}
    assert all(a == b for a, b in names)
    # globalPid values carry no thread bits; a decoded globalTid maps back onto one of them.
    streams = [g for g, in conn.execute("SELECT globalPid FROM ProcessStreams")]
    assert all(S.tid_of(g) == 0 and S.global_pid_of(g) == g for g in streams)
    table = schema.table(S.RUNTIME.base)
    for (gtid,) in conn.execute(f"SELECT DISTINCT globalTid FROM {table}"):
        assert S.pid_of(gtid) in pids
        assert S.global_pid_of(gtid) >> 24 & 0xFFFFFF == S.pid_of(gtid)
        assert 0 < S.tid_of(gtid) < 1 << 24


@needs_traces
@pytest.mark.parametrize("path", EXPORTS, ids=lambda p: p.relative_to(TRACES).as_posix())
def test_enums_resolve_with_or_without_enum_tables(path):
    schema = open_schema(path)
    assert schema.copy_kinds()[1] == ("HtoD", "src")
    assert schema.copy_kinds()[8] == ("DtoD", "")
    assert schema.host_memory_kinds() == {0: "pageable", 1: "pinned"}
    assert schema.event_type_ids("NvtxPushPopRange") == (59,)
    classes = schema.event_class_ids()
    assert (classes["runtime"], classes["driver"], classes["backtrace"]) == (0, 1, 67)


@needs_traces
def test_schema_2x_uses_its_own_metadata_table():
    schema = open_schema(TRACES / "pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite")
    assert schema.meta_table == "EXPORT_META_DATA"
    assert schema.schema_version == "2.9.1"
    assert "ENUM_CUDA_MEMCPY_OPER" not in schema._columns


@needs_traces
def test_empty_tables_count_as_absent():
    # schema 2.x creates every table eagerly; saxpy has an empty SYNCHRONIZATION table.
    schema = open_schema(TRACES / "pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite")
    assert "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION" in schema._columns
    assert schema.table(S.SYNC.base) is None
    assert schema.select(S.SYNC) is None


@needs_traces
def test_extra_columns_are_ignored_and_optional_ones_read_null():
    schema = open_schema(TRACES / "pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite")
    assert "name" in schema.columns("CUPTI_ACTIVITY_KIND_RUNTIME")  # appended by a user
    table, cols = schema.select(S.KERNEL)
    assert table == '"CUPTI_ACTIVITY_KIND_KERNEL"'
    assert cols.endswith("NULL")  # graphId does not exist in 2.9.1
    assert '"name"' not in schema.select(S.RUNTIME)[1]


@needs_traces
def test_string_cache_resolves_ids_and_passes_text_through():
    schema = open_schema(TRACES / "nsys-ai/mock.sqlite")
    strings = S.StringCache(schema.conn)
    name_id, = schema.conn.execute(
        "SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1").fetchone()
    assert isinstance(name_id, int)
    assert strings.get(name_id) and strings.get(name_id) == strings.get(name_id)
    assert strings.get("inline") == "inline"
    assert strings.get(None) == ""


# ----- fixtures/support-matrix.md -----------------------------------------------------------


def matrix_rows() -> list[tuple[str, str, str]]:
    """(schema version, nsys version, example trace) from the matrix's version table."""
    rows = []
    for line in MATRIX.read_text().splitlines():
        m = re.match(r"\|\s*(\d+\.\d+\.\d+)\s*\|\s*([\d.]+)\s*\|\s*`([^`]+)`", line)
        if m:
            rows.append(m.groups())
    return rows


def test_support_matrix_lists_schema_versions():
    rows = matrix_rows()
    assert len(rows) >= 8
    assert len({r[0] for r in rows}) == len(rows)


@pytest.mark.parametrize("row", matrix_rows(), ids=lambda r: r[0])
def test_each_listed_schema_has_a_trace_that_loads(row):
    schema_version, tool_version, example = row
    if "*" in example:
        candidates = sorted(REPO.glob(example))
    else:
        candidates = [p for p in [(REPO / example).resolve()] if p.is_file()]
    if not candidates:
        pytest.skip(f"{example} not present here (shared/ traces or scenario captures missing)")
    for trace in candidates:
        info = load_trace(trace).info
        assert info.schema_version == schema_version, trace
        assert info.tool_version.startswith(tool_version), trace


@needs_traces
def test_every_shared_export_schema_is_in_the_matrix():
    listed = {r[0] for r in matrix_rows()}
    for path in EXPORTS:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
            schema = S.NsysSchema(conn, path)
            assert schema.schema_version in listed, path
