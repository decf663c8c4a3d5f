"""Compressed input: which codec a file is stored in (told by its first bytes), and its stream.

Traces arrive gzipped (``trace.json.gz``, ``nsys.sqlite.gz``: what torch.profiler and most
scripts write) or xz-compressed (``*.json.xz``, ``*.sqlite.xz``: ``xz -9`` keeps a Kineto trace
in about half of gzip's size, which is how the test traces are stored). The name is not trusted:
the magic bytes decide, so a ``.gz`` that is really xz (or plain text) still reads, or gets our
one-line error.

xz is read through the stdlib's ``lzma`` with a memory limit (`MAX_XZ_MEMORY`):
``lzma.open`` has no such argument, and an xz header may ask for a 1.5 GiB dictionary from a
file of a few bytes. The size and ratio caps on what comes out are `CappedReader`'s
(`advisor.ingest.input_file`), the same for both codecs.
"""

from __future__ import annotations

import gzip
import io
import lzma
import zlib
from pathlib import Path
from typing import IO

from advisor.errors import TraceFormatError

GZIP_MAGIC = b"\x1f\x8b"
XZ_MAGIC = b"\xfd7zXZ\x00"
MAGIC_BYTES = len(XZ_MAGIC)
"""How many bytes of a file's head `codec_of` needs."""

MAX_XZ_MEMORY = 256 << 20
"""The most memory an xz stream may ask for to unpack. ``xz -9`` and ``-9e`` streams need
65 MiB (a 64 MiB dictionary); the largest preset xz has any use for on a trace."""

UNPACK_ERRORS = (EOFError, zlib.error, gzip.BadGzipFile, lzma.LZMAError)
"""What reading a truncated or corrupt compressed stream raises: gzip's (``BadGzipFile`` is an
``OSError``; catch these before ``OSError``) and lzma's (``LZMAError``, not an ``OSError``)."""


def codec_of(head: bytes) -> str | None:
    """``"gzip"``, ``"xz"``, or None for a file stored as it is."""
    if head.startswith(GZIP_MAGIC):
        return "gzip"
    if head.startswith(XZ_MAGIC):
        return "xz"
    return None


def open_unpacked(path: Path, codec: str) -> IO[bytes]:
    """The decompressed bytes of ``path`` (read-only) for a codec `codec_of` named."""
    if codec == "xz":
        return io.BufferedReader(_XzReader(path), buffer_size=1 << 20)
    return gzip.open(path, "rb")


def unpacked_head(path: Path, codec: str, n: int) -> bytes:
    """The first ``n`` decompressed bytes, decoding no further than they need: a sniffer must
    not read into (and fail on) damage further in, which the error of the full read names."""
    if codec == "gzip":
        with gzip.open(path, "rb") as f:
            return f.read(n)
    with path.open("rb") as f:
        return _XzReader.decompressor().decompress(f.read(1 << 16), max_length=n)


def unpack_error(path: Path, codec: str, e: BaseException) -> TraceFormatError:
    """The one-line error for a stream `UNPACK_ERRORS` stopped: cut short, or corrupt."""
    if isinstance(e, EOFError):
        return TraceFormatError(f"{path}: truncated {codec} file (the compressed data ends early)")
    if isinstance(e, lzma.LZMAError) and "memory" in str(e).lower():
        return TraceFormatError(f"{path}: refusing to decompress: the xz stream asks for more "
                                f"than {MAX_XZ_MEMORY >> 20} MiB of memory")
    return TraceFormatError(f"{path}: corrupt {codec} data ({e})")


class _XzReader(io.RawIOBase):
    """An xz file's decompressed bytes, with `MAX_XZ_MEMORY` (what ``lzma.open`` lacks).

    Concatenated streams (``cat a.xz b.xz``) read as one, like the ``xz`` tool reads them; bytes
    after the last stream that are not another stream are corrupt data."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self._file = path.open("rb")
        self._dec = self.decompressor()
        self._pending = b""  # compressed bytes read but not yet given to the decompressor

    @staticmethod
    def decompressor() -> lzma.LZMADecompressor:
        return lzma.LZMADecompressor(format=lzma.FORMAT_XZ, memlimit=MAX_XZ_MEMORY)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]  # io's buffer protocol
        view = memoryview(buffer).cast("B")
        while True:
            if self._dec.eof:
                rest = self._dec.unused_data + self._pending
                self._pending = b""
                if not rest:
                    rest = self._file.read(1 << 16)
                    if not rest:
                        return 0
                self._dec = self.decompressor()
                self._pending = rest
            if self._dec.needs_input and not self._pending:
                self._pending = self._file.read(1 << 16)
                if not self._pending:
                    raise EOFError("compressed file ended before the end-of-stream marker")
            data = self._dec.decompress(self._pending, max_length=len(view))
            self._pending = b""
            if data:
                view[: len(data)] = data
                return len(data)

    def close(self) -> None:
        self._file.close()
        super().close()
