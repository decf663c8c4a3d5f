"""xz-compressed traces (``*.json.xz``, ``*.sqlite.xz``) read like gzipped ones, through the same
caps, and a truncated or corrupt one is a one-line error (`advisor.ingest.compression`).

The inputs are real traces: the packaged nsys example and a fixture Kineto trace, each
re-compressed here both ways so the two codecs are compared on the same bytes."""

from __future__ import annotations

import gzip
import lzma
import struct
import zlib
from pathlib import Path

import pytest

from advisor.errors import TraceFormatError
from advisor.ingest.base import LoadOptions, load_trace
from advisor.ingest.folder import split_traces
from advisor.ingest.input_file import CappedReader, UnpackLimits
from advisor.ingest.slim_trace import summary_graph
from tests.cli.test_errors import assert_one_line_error, run

ROOT = Path(__file__).resolve().parents[2]
NSYS = ROOT / "advisor" / "examples" / "h100-host-sync.sqlite.gz"
KINETO = ROOT / "fixtures" / "scenarios" / "fp32-matmul" / "bad" / "trace.json.gz"


def _plain(path: Path) -> bytes:
    opener = lzma.open if path.suffix == ".xz" else gzip.open
    with opener(path, "rb") as f:
        return f.read()


def _both(src: Path, tmp_path: Path, stem: str) -> tuple[Path, Path]:
    """``stem.gz`` and ``stem.xz`` in tmp_path holding the same bytes as ``src``."""
    data = _plain(src)
    gz, xz = tmp_path / f"{stem}.gz", tmp_path / f"{stem}.xz"
    gz.write_bytes(gzip.compress(data, compresslevel=1))
    xz.write_bytes(lzma.compress(data, preset=1))
    return gz, xz


def _same_graph(a, b) -> None:
    assert a.gpu_ops and a.gpu_ops == b.gpu_ops
    assert a.api_calls == b.api_calls and a.ranges == b.ranges and a.syncs == b.syncs
    assert a.steps == b.steps


@pytest.mark.parametrize("src, stem", [(NSYS, "nsys.sqlite"), (KINETO, "trace.json")],
                         ids=["nsys", "kineto"])
def test_xz_reads_as_gzip_does(tmp_path, src, stem):
    gz, xz = _both(src, tmp_path, stem)
    _same_graph(load_trace(gz), load_trace(xz))


def test_xz_named_gz_is_told_by_its_bytes(tmp_path):
    """The magic decides, not the name: a ``.gz`` that is really xz still reads."""
    _, xz = _both(NSYS, tmp_path, "nsys.sqlite")
    odd = tmp_path / "odd.sqlite.gz"
    odd.write_bytes(xz.read_bytes())
    assert load_trace(odd).gpu_ops == load_trace(xz).gpu_ops


def test_an_xz_trace_in_a_folder_is_a_trace(tmp_path):
    _, xz = _both(KINETO, tmp_path, "rank0.json")
    traces, skipped = split_traces([xz])
    assert traces == [xz] and skipped == []


def test_the_job_path_slims_an_xz_trace_like_a_gzipped_one(tmp_path):
    gz, xz = _both(KINETO, tmp_path, "trace.json")
    a, b = summary_graph(gz, LoadOptions()), summary_graph(xz, LoadOptions())
    # the trace has step ranges: the cut is taken, from either codec
    whole = load_trace(xz).info.totals["events"]
    assert a.info.totals["events"] < whole and b.info.totals["events"] < whole
    assert a.info.totals == b.info.totals
    _same_graph(a, b)  # ids included: the same events kept


def _cut(path: Path, keep: float) -> Path:
    data = path.read_bytes()
    cut = path.with_name("cut-" + path.name)
    cut.write_bytes(data[: int(len(data) * keep)])
    return cut


def _corrupt(path: Path) -> Path:
    data = bytearray(path.read_bytes())
    mid = len(data) // 2
    data[mid : mid + 64] = bytes(b ^ 0xA5 for b in data[mid : mid + 64])
    bad = path.with_name("bad-" + path.name)
    bad.write_bytes(bytes(data))
    return bad


@pytest.mark.parametrize("src, stem", [(NSYS, "nsys.sqlite"), (KINETO, "trace.json")],
                         ids=["nsys", "kineto"])
@pytest.mark.parametrize("damage", ["truncated", "corrupt"])
def test_damaged_xz_is_a_one_line_error(tmp_path, src, stem, damage):
    _, xz = _both(src, tmp_path, stem)
    bad = _cut(xz, 0.5) if damage == "truncated" else _corrupt(xz)
    with pytest.raises(TraceFormatError) as caught:
        load_trace(bad)
    message = str(caught.value)
    assert message.startswith(str(bad)) and "\n" not in message
    assert "xz" in message and ("truncated" in message or "corrupt" in message), message
    assert_one_line_error(run("analyze", str(bad)), "xz")


def test_an_xz_header_asking_for_gigabytes_of_memory_is_refused(tmp_path):
    """An xz block header may ask for a 4 GiB dictionary from a file of a few bytes; the
    reader refuses it before allocating (`compression.MAX_XZ_MEMORY`)."""
    packed = bytearray(lzma.compress(_plain(KINETO), preset=0))
    # Single-threaded xz: the block header follows the 12-byte stream header; byte 16 is the
    # LZMA2 dictionary-size property (40: 4 GiB), bytes 20-23 the header's CRC32.
    assert packed[13:16] == b"\x00\x21\x01"
    packed[16] = 40
    packed[20:24] = struct.pack("<I", zlib.crc32(bytes(packed[12:20])))
    hungry = tmp_path / "trace.json.xz"
    hungry.write_bytes(bytes(packed))
    with pytest.raises(TraceFormatError, match="refusing to decompress: the xz stream asks"):
        load_trace(hungry)


def test_the_unpack_caps_hold_for_xz(tmp_path):
    _, xz = _both(KINETO, tmp_path, "trace.json")
    with CappedReader(xz, UnpackLimits(max_bytes=1000, max_ratio=1e9)) as f, \
            pytest.raises(TraceFormatError, match="refusing to decompress"):
        f.read()
