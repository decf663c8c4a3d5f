"""The user's input file at the boundary: a regular file we can read, decompressed within caps.

Every reader (traces of both formats, the gate's saved results) opens its input through here,
so these hold for all of them:

* Only regular files are read: a FIFO or a device would block forever or never end; a path
  too long, or in a directory we cannot search, is a one-line error, not a traceback.
* gzip and xz are decompressed through `CappedReader` (the codec told by the file's first
  bytes, `advisor.ingest.compression`): a small ``.gz`` or ``.xz`` cannot unpack to gigabytes
  (a decompression bomb, or one 400 MB string in a few hundred kB). The cap is on size
  (``LoadOptions.max_unpacked_bytes``, ``--max-unpacked``) and on ratio: beyond a floor, more
  than ``max_unpack_ratio`` times the compressed size is refused. Real traces compress 5-31x
  (fixtures and ../shared/traces); the default ratio 200 leaves a wide margin.
* Disk errors while unpacking (a full disk, a file-size limit) are one-line errors too.
"""

from __future__ import annotations

import errno
import math
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from advisor.errors import InputError, TraceFormatError
from advisor.ingest.compression import (
    GZIP_MAGIC,
    MAGIC_BYTES,
    UNPACK_ERRORS,
    codec_of,
    open_unpacked,
    unpack_error,
)

GIB = 1 << 30
RATIO_FLOOR_BYTES = 256 << 20  # below this much output, any ratio is fine (tiny, sparse files)


MAX_NAME_CHARS = 16384
"""Names (kernels, ranges, calls, processes, threads) are cut to this many characters as they
are read, with "…" marking the cut: a small file may hold, or generate (a SQLite generated
column, a gzip of one long string), names of hundreds of megabytes, and every report would hold
them per event. The longest name in the fixtures and ../shared/traces is a 7,528-character
operator range with its input shapes; demangled kernel names stay under 1,500."""


@dataclass(frozen=True)
class UnpackLimits:
    max_bytes: int = 32 * GIB
    max_ratio: float = 200.0


def human_size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:g} {unit}"
        n /= 1024
    return f"{n:g} GiB"


def parse_size(text: str) -> int:
    """``"32G"``, ``"500M"``, ``"1.5GiB"``, ``"1048576"`` -> bytes (binary units)."""
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(t[-1:], 1)
    number = t[:-1] if scale > 1 else t
    value = float(number) * scale
    if not (math.isfinite(value) and value >= 1):  # "inf", "nan", "1e400": no size
        raise ValueError(text)
    return int(value)


def check_regular(path: Path) -> os.stat_result:
    """The file's stat, or `InputError` when it is missing, not a regular file, or unreachable."""
    try:
        st = os.stat(path)
    except FileNotFoundError as e:
        raise InputError(f"{path}: no such file") from e
    except OSError as e:
        if e.errno == errno.ENOTDIR:
            raise InputError(f"{path}: no such file (a parent is not a directory)") from e
        raise InputError(f"{path}: cannot read ({e.strerror or e})") from e
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{path}: is a directory, not a trace file")
    if not stat.S_ISREG(st.st_mode):
        kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(st.st_mode) else
                "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else
                "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
        raise InputError(f"{path}: {kind}, not a trace file; save the trace to a file first")
    return st


def read_head(path: Path, n: int) -> bytes:
    """The first ``n`` bytes of a checked regular file."""
    check_regular(path)
    try:
        with path.open("rb") as f:
            return f.read(n)
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror or e})") from e


class CappedReader:
    """A gzip or xz stream's decompressed bytes that refuses to go past the caps (a file that
    is neither is read as gzip, whose reader then names it corrupt)."""

    def __init__(self, path: Path, limits: UnpackLimits | None = None) -> None:
        limits = limits or UnpackLimits()
        self.path = path
        compressed = check_regular(path).st_size
        ratio_cap = max(RATIO_FLOOR_BYTES, int(limits.max_ratio * compressed))
        self.cap = min(limits.max_bytes, ratio_cap)
        self.by_ratio = ratio_cap < limits.max_bytes
        self.limits = limits
        self.produced = 0
        try:
            self.codec = codec_of(read_head(path, MAGIC_BYTES)) or "gzip"
            self._gz: IO[bytes] = open_unpacked(path, self.codec)
        except OSError as e:
            raise InputError(f"{path}: cannot read ({e.strerror or e})") from e

    def read(self, n: int = -1) -> bytes:
        want = self.cap + 1 - self.produced if n is None or n < 0 else n
        data = self._gz.read(min(want, self.cap + 1 - self.produced))
        self.produced += len(data)
        if self.produced > self.cap:
            if self.by_ratio:
                why = (f"it unpacks to more than {self.limits.max_ratio:g} times its compressed "
                       f"size (a decompression bomb?)")
            else:
                why = f"it unpacks to more than {human_size(self.cap)}"
            raise TraceFormatError(f"{self.path}: refusing to decompress: {why}; raise the cap "
                                   "with --max-unpacked if the file is genuine")
        return data

    def close(self) -> None:
        self._gz.close()

    def __enter__(self) -> CappedReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def is_gzip(path: Path) -> bool:
    return read_head(path, 2) == GZIP_MAGIC


def copy_unpacked(path: Path, dest: Path, limits: UnpackLimits | None = None) -> None:
    """Decompress ``path`` into ``dest`` within the caps; disk errors are one-line errors."""
    codec = "gzip"
    try:
        with CappedReader(path, limits) as src, dest.open("wb") as dst:
            codec = src.codec
            while True:
                chunk = src.read(1 << 20)
                if not chunk:
                    break
                dst.write(chunk)
    except UNPACK_ERRORS as e:
        if codec == "xz":
            raise unpack_error(path, codec, e) from e
        raise TraceFormatError(f"{path}: truncated or corrupt gzip file") from e
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT):
            raise InputError(f"{path}: cannot unpack it into {dest.parent}: {e.strerror} "
                             "(set TMPDIR to a disk with room)") from e
        raise InputError(f"{path}: cannot unpack it ({e.strerror or e})") from e
