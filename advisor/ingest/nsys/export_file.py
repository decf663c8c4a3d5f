"""Open an Nsight Systems SQLite export safely: read-only, checked, gzip or xz allowed.

SQLite reads pages lazily, so a truncated file can open fine and fail halfway through a
query with "database disk image is malformed". The header says how many pages the file should
have; checking it up front turns that into one plain sentence before any work is done.
Exports are often shipped gzipped (``nsys.sqlite.gz``) or xz-compressed (``nsys.sqlite.xz``);
SQLite cannot read those in place, so they are streamed into a private temporary file, never
next to the input.
"""

from __future__ import annotations

import contextlib
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path

from advisor.errors import InputError, TraceFormatError
from advisor.ingest.compression import MAGIC_BYTES, UNPACK_ERRORS, codec_of, unpacked_head
from advisor.ingest.input_file import UnpackLimits, copy_unpacked, read_head
from advisor.ingest.nsys.schema import SQLITE_MAGIC

_HEADER_BYTES = 100


def is_gzip(head: bytes) -> bool:
    """True for a compressed file's head: gzip or xz (the name predates xz)."""
    return codec_of(head) is not None


def gzipped_sqlite(path: Path) -> bool:
    """True for a gzip or xz file whose content starts like an SQLite database."""
    try:
        codec = codec_of(read_head(path, MAGIC_BYTES))
        if codec is None:
            return False
        return unpacked_head(path, codec, len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except (OSError, *UNPACK_ERRORS, InputError):
        return False


@contextlib.contextmanager
def materialized(path: Path, limits: UnpackLimits | None = None) -> Iterator[Path]:
    """The path SQLite can open: the file itself, or a temporary unpacked copy (within the
    caps of `advisor.ingest.input_file`)."""
    if not is_gzip(read_head(path, MAGIC_BYTES)):
        yield path
        return
    try:
        tmp_dir = tempfile.TemporaryDirectory(prefix="advisor-nsys-")
    except OSError as e:
        raise InputError(f"{path}: cannot create a temporary directory to unpack it "
                         f"({e.strerror or e})") from e
    with tmp_dir as tmp:
        plain = Path(tmp) / "export.sqlite"  # not the input's name: that may be at NAME_MAX
        copy_unpacked(path, plain, limits)
        yield plain


def check_header(path: Path, shown: Path) -> None:
    """Fail fast on a file shorter than its SQLite header says (a truncated download/copy)."""
    size = path.stat().st_size
    with path.open("rb") as f:
        header = f.read(_HEADER_BYTES)
    if len(header) < _HEADER_BYTES or not header.startswith(SQLITE_MAGIC):
        raise TraceFormatError(f"{shown}: truncated or corrupt SQLite file")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1):
        raise TraceFormatError(f"{shown}: truncated or corrupt SQLite file")
    change_counter = header[24:28]
    valid_for = header[92:96]
    pages = int.from_bytes(header[28:32], "big")
    # The in-header page count is trustworthy only when written by a recent SQLite.
    header_count_valid = pages > 0 and change_counter == valid_for
    if size % page_size or (header_count_valid and size < pages * page_size):
        raise TraceFormatError(f"{shown}: truncated or corrupt SQLite file")


def connect_read_only(path: Path, shown: Path) -> sqlite3.Connection:
    """A read-only, immutable connection: no locks, no journal, nothing written beside it."""
    check_header(path, shown)
    uri = path.resolve().as_uri() + "?mode=ro&immutable=1"
    try:
        conn = sqlite3.connect(uri, uri=True)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as e:
        raise TraceFormatError(f"{shown}: truncated or corrupt SQLite file") from e
    # Some exports hold non-UTF-8 bytes (TARGET_INFO_SYSTEM_ENV in nsys 2022.2): never fail on them.
    conn.text_factory = _decode
    _limit_values(conn)
    return conn


MAX_VALUE_BYTES = 1 << 20
"""No value read from an export may be longer (SQLite's ``SQLITE_LIMIT_LENGTH`` on the
connection). nsys writes names and short texts (the longest string in the fixtures is a
23 kB captured stdout line); a generated column or a view can make a small file compute
values of hundreds of megabytes per row. Over the limit SQLite stops building the value at
once: ``printf`` gives NULL, other functions and stored values an error
(`advisor.ingest.nsys.loader` says which value, in one line)."""


def _limit_values(conn: sqlite3.Connection) -> None:
    """Cap every string and blob SQLite builds or reads on this connection (Python 3.11+:
    ``Connection.setlimit``; on 3.10 names are still cut by the queries, `schema.capped`)."""
    setlimit = getattr(conn, "setlimit", None)
    if setlimit is not None:
        setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")
