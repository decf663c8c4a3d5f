"""Everything that differs between Nsight Systems SQLite export versions, in one place.

The loader (`advisor.ingest.nsys.loader`) asks this module which table to read, which columns
it has, what an enum value means and how to decode an id; it never spells a table variant or an
enum number itself. What varies, from schema 2.9.1 (nsys 2022.2) to 3.25.0 (nsys 2026.2):

* Tables exist only when the capture has such rows (3.x), or are created eagerly and left empty
  (2.x): an empty table counts as absent.
* Tables get ``_V<n>`` variants when their layout changes; the highest variant with rows wins.
* ``META_DATA_EXPORT`` was ``EXPORT_META_DATA`` in 2.x; ``ENUM_*`` tables do not exist in 2.x, so
  the enums below carry the values those exports use.
* Names are ids into ``StringIds`` (``nameId``, ``textId``, ``demangledName``) or inline text
  (``NVTX_EVENTS.text``); `StringCache` resolves both.
* Columns come and go (``graphId`` on kernels since 3.2x, ``deprecatedSyncType``, ``greenContextId``
  ...) and users append their own: extra columns are ignored, missing optional ones read as NULL,
  missing required ones fail naming ``table.column``.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from advisor.errors import TraceFormatError
from advisor.ingest.input_file import MAX_NAME_CHARS

SQLITE_MAGIC = b"SQLite format 3\x00"

# ----- global ids -------------------------------------------------------------------------------
# nsys packs ids as (hardware id << 56) | (pid << 24) | tid; verified against PROCESSES.pid and
# ProcessStreams.globalPid on every export in ../shared/traces.

_ID_MASK = 0xFFFFFF


def pid_of(global_id: int) -> int:
    """The OS process id inside a ``globalPid`` or ``globalTid``."""
    return (global_id >> 24) & _ID_MASK


def tid_of(global_tid: int) -> int:
    """The OS thread id inside a ``globalTid``."""
    return global_tid & _ID_MASK


def global_pid_of(global_tid: int) -> int:
    """The ``globalPid`` a ``globalTid`` belongs to (its thread bits cleared)."""
    return (global_tid >> 24) << 24


# ----- table specs ------------------------------------------------------------------------------


@dataclass(frozen=True)
class TableSpec:
    """What the loader reads from one table: required columns fail loudly, optional read NULL."""

    base: str
    required: tuple[str, ...]
    optional: tuple[str, ...] = ()

    @property
    def columns(self) -> tuple[str, ...]:
        return self.required + self.optional


RUNTIME = TableSpec(
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    ("start", "end", "globalTid", "correlationId", "nameId"),
    ("eventClass",),
)
KERNEL = TableSpec(
    "CUPTI_ACTIVITY_KIND_KERNEL",
    ("start", "end", "deviceId", "streamId", "correlationId", "globalPid", "demangledName"),
    ("shortName", "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ", "graphNodeId",
     "graphId"),
)
MEMCPY = TableSpec(
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    ("start", "end", "deviceId", "streamId", "correlationId", "globalPid", "bytes", "copyKind"),
    ("srcKind", "dstKind", "graphNodeId"),
)
MEMSET = TableSpec(
    "CUPTI_ACTIVITY_KIND_MEMSET",
    ("start", "end", "deviceId", "streamId", "correlationId", "globalPid", "bytes"),
    ("graphNodeId",),
)
GRAPH_TRACE = TableSpec(
    "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
    ("start", "end", "deviceId", "streamId", "correlationId", "globalPid", "graphId"),
    ("graphExecId",),
)
SYNC = TableSpec(
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    ("start", "end", "globalPid", "correlationId", "syncType"),
    ("deviceId", "streamId"),
)
NVTX = TableSpec(
    "NVTX_EVENTS",
    ("start", "end", "eventType", "globalTid"),
    ("text", "textId", "domainId", "endGlobalTid"),
)
THREAD_NAMES = TableSpec("ThreadNames", ("globalTid", "nameId"))
PROCESSES = TableSpec("PROCESSES", ("globalPid", "pid", "name"))
GPU_INFO = TableSpec(
    "TARGET_INFO_GPU",
    ("id", "name"),
    ("cuDevice", "smCount", "totalMemory", "computeMajor", "computeMinor"),
)
CUDA_DEVICE = TableSpec("TARGET_INFO_CUDA_DEVICE", ("gpuId", "cudaId"))
SYSTEM_ENV = TableSpec("TARGET_INFO_SYSTEM_ENV", ("name", "value"))
CAPTURE_META = TableSpec("META_DATA_CAPTURE", ("name", "value"))
"""How the capture was configured: one CAPTURE_EVENT_TYPE row per traced API (Cuda, NvtxEvents,
OSRuntime, CuBLAS, CuDNN, ...). Each traced API costs the host per call (profiler_cost)."""

GPU_OP_SPECS = (KERNEL, MEMCPY, MEMSET, GRAPH_TRACE)
"""Tables of device work, each read with the same window predicate."""

# ----- row validation ---------------------------------------------------------------------------
# The one type check of every row the loader reads (`checked_rows`): SQLite columns are typed
# loosely, so a hand-edited or corrupted export can hold text, reals or NULL anywhere.

TEXT_COLUMNS = frozenset({"text", "value", "name", "nameId", "textId", "demangledName",
                          "shortName"})
"""Columns that hold text, or a StringIds id that `StringCache` resolves whatever its type;
every other column the specs read holds integers (ids, times, enums, counts)."""

_TIMES = frozenset({"start", "end"})
NOT_NULL = {
    "CUPTI_ACTIVITY_KIND_RUNTIME": _TIMES | {"globalTid", "correlationId"},
    "CUPTI_ACTIVITY_KIND_KERNEL": _TIMES | {"globalPid"},
    "CUPTI_ACTIVITY_KIND_MEMCPY": _TIMES | {"globalPid"},
    "CUPTI_ACTIVITY_KIND_MEMSET": _TIMES | {"globalPid"},
    "CUPTI_ACTIVITY_KIND_GRAPH_TRACE": _TIMES | {"globalPid"},
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": _TIMES | {"globalPid"},
    "NVTX_EVENTS": frozenset({"start"}),  # markers and domain rows have no end or thread
}
"""Columns the loader does arithmetic or joins on: NULL there is a malformed row."""

_INT64 = 1 << 63


def checked_rows(rows: Iterable[tuple], spec: TableSpec, table: str, path: Path,
                 selected: tuple[str, ...]) -> Iterator[tuple]:
    """``rows`` (rowid first, then ``spec.columns``), each checked; a row with a wrong type
    raises `TraceFormatError` naming the table, column and row.

    ``selected`` are the columns present in the table (absent optional ones read NULL)."""
    not_null = NOT_NULL.get(spec.base, frozenset())
    ints = [(i + 1, c, c in not_null) for i, c in enumerate(spec.columns)
            if c not in TEXT_COLUMNS and c in selected]
    for row in rows:
        for i, column, required in ints:
            v = row[i]
            if v.__class__ is int:
                continue
            if v is None and not required:
                continue
            what = "NULL" if v is None else f"{type(v).__name__} {str(v)[:40]!r}"
            raise TraceFormatError(f"{path}: malformed Nsight Systems export: {table}.{column} "
                                   f"of row {row[0]} is {what}, expected an integer")
        yield row

# ----- enums ------------------------------------------------------------------------------------
# Defaults are the values of exports without ENUM_* tables (schema 2.x), identical to the
# ENUM_* contents of every 3.x export we have.

_COPY_KIND_DEFAULT = {
    0: "CUDA_MEMCPY_KIND_UNKNOWN", 1: "CUDA_MEMCPY_KIND_HTOD", 2: "CUDA_MEMCPY_KIND_DTOH",
    3: "CUDA_MEMCPY_KIND_HTOA", 4: "CUDA_MEMCPY_KIND_ATOH", 5: "CUDA_MEMCPY_KIND_ATOA",
    6: "CUDA_MEMCPY_KIND_ATOD", 7: "CUDA_MEMCPY_KIND_DTOA", 8: "CUDA_MEMCPY_KIND_DTOD",
    9: "CUDA_MEMCPY_KIND_HTOH", 10: "CUDA_MEMCPY_KIND_PTOP", 11: "CUDA_MEMCPY_KIND_UVM_HTOD",
    12: "CUDA_MEMCPY_KIND_UVM_DTOH", 13: "CUDA_MEMCPY_KIND_UVM_DTOD",
}
_MEM_KIND_DEFAULT = {
    0: "CUDA_MEMOPR_MEMORY_KIND_PAGEABLE", 1: "CUDA_MEMOPR_MEMORY_KIND_PINNED",
    2: "CUDA_MEMOPR_MEMORY_KIND_DEVICE", 3: "CUDA_MEMOPR_MEMORY_KIND_ARRAY",
    4: "CUDA_MEMOPR_MEMORY_KIND_MANAGED", 5: "CUDA_MEMOPR_MEMORY_KIND_DEVICE_STATIC",
    6: "CUDA_MEMOPR_MEMORY_KIND_MANAGED_STATIC", 7: "CUDA_MEMOPR_MEMORY_KIND_UNKNOWN",
}
_SYNC_TYPE_DEFAULT = {
    0: "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN",
    1: "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE",
    2: "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT",
    3: "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE",
    4: "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE",
}
_EVENT_TYPE_DEFAULT = {
    59: "NvtxPushPopRange", 60: "NvtxStartEndRange", 70: "NvtxtPushPopRange",
    71: "NvtxtStartEndRange", 75: "NvtxDomainCreate",
}
_EVENT_CLASS_DEFAULT = {
    0: "TRACE_PROCESS_EVENT_CUDA_RUNTIME", 1: "TRACE_PROCESS_EVENT_CUDA_DRIVER",
    67: "TRACE_PROCESS_EVENT_CUDABACKTRACE",
}

NVTX_RANGE_TYPES = ("NvtxPushPopRange", "NvtxStartEndRange", "NvtxtPushPopRange",
                    "NvtxtStartEndRange")

# copyKind enum name suffix -> (model copy_kind, which side touches host memory)
_COPY_KINDS: dict[str, tuple[str, str]] = {
    "HTOD": ("HtoD", "src"), "DTOH": ("DtoH", "dst"), "DTOD": ("DtoD", ""),
    "HTOH": ("HtoH", "both"), "PTOP": ("PtoP", ""), "HTOA": ("HtoD", "src"),
    "ATOH": ("DtoH", "dst"), "ATOA": ("DtoD", ""), "ATOD": ("DtoD", ""), "DTOA": ("DtoD", ""),
    "UVM_HTOD": ("HtoD", ""), "UVM_DTOH": ("DtoH", ""), "UVM_DTOD": ("DtoD", ""),
}
# syncType enum name suffix -> model SyncKind value
_SYNC_KINDS = {
    "EVENT_SYNCHRONIZE": "event", "STREAM_WAIT_EVENT": "stream_wait_event",
    "STREAM_SYNCHRONIZE": "stream", "CONTEXT_SYNCHRONIZE": "device",
}


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def capped(column: str) -> str:
    """SQL reading a text column cut to `MAX_NAME_CHARS` characters plus "…" where it was
    longer, in the query, so a long value never reaches Python whole. Integers (string ids in
    the id-or-text columns) pass unchanged."""
    n = MAX_NAME_CHARS
    return (f"CASE WHEN typeof({column}) = 'text' AND length({column}) > {n} "
            f"THEN substr({column}, 1, {n}) || '…' ELSE {column} END")


_ROWID_ALIASES = ("rowid", "_rowid_", "oid")


_VIRTUAL_GENERATED = 2  # ``PRAGMA table_xinfo``'s ``hidden``: a column computed on every read


def _refuse_computed_columns(table: str, info: list[tuple], path: Path) -> None:
    """Refuse a table with a VIRTUAL generated column. nsys writes none, and SQLite computes
    such a column on every read, one expression per row that no limit interrupts (a
    ``printf('%.*c', 500000000, 'x')`` column took 5 s a row in a 688 kB file). Stored
    generated columns (computed when written) read like any other column."""
    computed = [str(r[1]) for r in info if r[6] == _VIRTUAL_GENERATED]
    if computed:
        raise TraceFormatError(f"{path}: column {table}.{computed[0]} is computed on every read "
                               "(a generated column): not an export nsys wrote")


class NsysSchema:
    """The tables, columns, enums and versions of one open export."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self.conn = conn
        self.path = path
        self._columns: dict[str, tuple[str, ...]] = {}
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
            info = conn.execute(f"PRAGMA table_xinfo({_quote(name)})").fetchall()
            _refuse_computed_columns(name, info, path)
            self._columns[name] = tuple(r[1] for r in info if r[6] in (0, 3))
        self._resolved: dict[str, str | None] = {}
        self._rowids: dict[str, str] = {}
        self.meta_table = self._first_present("META_DATA_EXPORT", "EXPORT_META_DATA")
        if self.meta_table is None or "StringIds" not in self._columns:
            raise TraceFormatError(
                f"{path}: SQLite, but not an Nsight Systems export "
                "(no META_DATA_EXPORT/StringIds tables)"
            )
        self.meta = dict(self._rows(
            f"SELECT {capped('name')}, {capped('value')} FROM {_quote(self.meta_table)}"))

    # ----- versions -------------------------------------------------------------------------

    @property
    def schema_version(self) -> str:
        return str(self.meta.get("EXPORT_SCHEMA_VERSION", ""))

    @property
    def tool_version(self) -> str:
        return str(self.meta.get("EXPORT_PRODUCT_VERSION", ""))

    # ----- tables and columns ---------------------------------------------------------------

    def table_names(self) -> list[str]:
        return list(self._columns)

    def _first_present(self, *names: str) -> str | None:
        return next((n for n in names if n in self._columns), None)

    def _rows(self, sql: str, params: Iterable[object] = ()) -> list[tuple]:
        return self.conn.execute(sql, tuple(params)).fetchall()

    def _has_rows(self, table: str) -> bool:
        return self.conn.execute(f"SELECT 1 FROM {_quote(table)} LIMIT 1").fetchone() is not None

    def table(self, base: str) -> str | None:
        """The table holding ``base``'s rows: the highest ``_V<n>`` variant with rows, or None."""
        if base not in self._resolved:
            pattern = re.compile(re.escape(base) + r"(?:_V(\d+))?$")
            variants = sorted(
                ((int(m.group(1) or 0), name) for name in self._columns
                 if (m := pattern.match(name))),
                reverse=True,
            )
            self._resolved[base] = next(
                (name for _, name in variants if self._has_rows(name)), None
            )
        return self._resolved[base]

    def columns(self, table: str) -> tuple[str, ...]:
        return self._columns.get(table, ())

    def has_column(self, base: str, column: str) -> bool:
        table = self.table(base)
        return table is not None and column in self._columns[table]

    def select(self, spec: TableSpec, prefix: str = "") -> tuple[str, str] | None:
        """``(table, "col, col, NULL, ...")`` in ``spec.columns`` order, or None if no rows.

        Raises `TraceFormatError` naming every missing required ``table.column``.
        """
        table = self.table(spec.base)
        if table is None:
            return None
        have = set(self._columns[table])
        missing = [f"{table}.{c}" for c in spec.required if c not in have]
        if missing:
            raise TraceFormatError(
                f"{self.path}: Nsight Systems export (schema {self.schema_version or '?'}) "
                f"lacks required column{'s' if len(missing) > 1 else ''} {', '.join(missing)}"
            )
        cols = ", ".join(
            (capped(f"{prefix}{_quote(c)}") if c in TEXT_COLUMNS else f"{prefix}{_quote(c)}")
            if c in have else "NULL" for c in spec.columns)
        return _quote(table), cols

    def rowid(self, table: str) -> str:
        """The name that reads ``table``'s rowids (the events' ids): ``rowid``, unless a column
        of that name hides it. A table without rowids (``WITHOUT ROWID``, which nsys never
        writes) or with every alias taken is refused in one line."""
        known = self._rowids.get(table)
        if known is not None:
            return known
        alias = next((a for a in _ROWID_ALIASES
                      if a not in {c.lower() for c in self._columns.get(table, ())}), None)
        if alias is not None:
            try:
                self.conn.execute(f"SELECT {alias} FROM {_quote(table)} LIMIT 0")
                self._rowids[table] = alias
                return alias
            except sqlite3.OperationalError:
                pass
        raise TraceFormatError(f"{self.path}: table {table} has no row ids (WITHOUT ROWID, or "
                               "columns named rowid, _rowid_ and oid): not an export nsys wrote")

    # ----- enums ------------------------------------------------------------------------------

    def enum(self, name: str, default: dict[int, str]) -> dict[int, str]:
        """id -> enum name from ``ENUM_<...>`` when the export has it, else the 2.x values.
        Rows whose id is not an integer are no enum value and are left out."""
        if name not in self._columns or "name" not in self._columns[name] \
                or "id" not in self._columns[name]:
            return dict(default)
        return {i: str(n) for i, n in self._rows(f"SELECT id, {capped('name')} FROM {_quote(name)}")
                if type(i) is int}

    def event_type_ids(self, *names: str) -> tuple[int, ...]:
        """``NVTX_EVENTS.eventType`` ids for the given ``ENUM_NSYS_EVENT_TYPE`` names."""
        table = self.enum("ENUM_NSYS_EVENT_TYPE", _EVENT_TYPE_DEFAULT)
        wanted = set(names)
        return tuple(sorted(i for i, n in table.items() if n in wanted))

    def event_class_ids(self) -> dict[str, int | None]:
        """``eventClass`` ids of runtime, driver and backtrace rows in the RUNTIME table."""
        table = {n: i for i, n in self.enum("ENUM_NSYS_EVENT_CLASS", _EVENT_CLASS_DEFAULT).items()}
        return {
            "runtime": table.get("TRACE_PROCESS_EVENT_CUDA_RUNTIME"),
            "driver": table.get("TRACE_PROCESS_EVENT_CUDA_DRIVER"),
            "backtrace": table.get("TRACE_PROCESS_EVENT_CUDABACKTRACE"),
        }

    def copy_kinds(self) -> dict[int, tuple[str, str]]:
        """copyKind id -> (model copy_kind, host side: "src", "dst", "both" or "")."""
        out = {}
        for i, name in self.enum("ENUM_CUDA_MEMCPY_OPER", _COPY_KIND_DEFAULT).items():
            suffix = name.removeprefix("CUDA_MEMCPY_KIND_")
            out[i] = _COPY_KINDS.get(suffix, ("", ""))
        return out

    def host_memory_kinds(self) -> dict[int, str]:
        """srcKind/dstKind id -> "pageable" / "pinned" (other memory kinds are absent)."""
        out = {}
        for i, name in self.enum("ENUM_CUDA_MEM_KIND", _MEM_KIND_DEFAULT).items():
            if name.endswith("_PAGEABLE"):
                out[i] = "pageable"
            elif name.endswith("_PINNED"):
                out[i] = "pinned"
        return out

    def sync_kinds(self) -> dict[int, str]:
        """syncType id -> model SyncKind value. Unreliable across versions: see the loader."""
        out = {}
        for i, name in self.enum("ENUM_CUPTI_SYNC_TYPE", _SYNC_TYPE_DEFAULT).items():
            suffix = name.removeprefix("CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_")
            out[i] = _SYNC_KINDS.get(suffix, "other")
        return out


def as_text(value: object) -> str:
    """A text column's value as text: SQLite's loose typing lets a hand-edited or damaged export
    store a BLOB (Python ``bytes``, which the connection's text factory never sees) or a number
    where nsys writes text; a BLOB reads as UTF-8 with bad bytes replaced, anything else as
    ``str``, NULL as ""."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


class StringCache:
    """Resolves ``StringIds`` ids on demand, so memory holds only the names the window uses."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._cache: dict[int, str] = {}

    def get(self, value: object) -> str:
        """The text of a string id; inline text passes through; NULL reads as ""."""
        if value is None:
            return ""
        if not isinstance(value, int) or isinstance(value, bool):
            return as_text(value)
        hit = self._cache.get(value)
        if hit is None:
            row = self._conn.execute(f"SELECT {capped('value')} FROM StringIds WHERE id = ?",
                                     (value,)).fetchone()
            hit = "" if row is None else as_text(row[0])
            self._cache[value] = hit
        return hit
