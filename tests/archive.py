"""The evidence archive, `fixtures/archive/`: read through here, never swept by the tests.

The archive keeps the captures, logs and measured figures that calibrate the model and back the
docs' tables (its README says which backs what). Its traces are stored xz-compressed
(``trace_rank0.json.xz``, ``nsys_rank0.sqlite.xz``): xz -9 keeps a Kineto JSON in 25% less than
gzip -9 and an nsys export in 40% less, which is what keeps the tracked tree small. advisor reads
gzip, not xz (users' traces come gzipped or bare), so a test or a benchmark that reads an archived
trace asks `archived()` for it: the file or folder comes back as a copy in a cache outside the
tree with every xz-stored trace turned back into the ``*.gz`` the capture wrote (gzip level 1: the
copy is read once and thrown away with the cache), every other file copied as it is. So paths
inside a capture folder (``trace_rank0.json.gz``, ``steps_rank0.json``) are the ones
`advisor profile` wrote, and the code that reads them needs no change.

The cache (``$ADVISOR_ARCHIVE_CACHE``, else a folder in the temporary directory named after this
checkout) is filled once per source file and checked by size and modification time; copies are
written to a temporary name and renamed, so parallel test workers can share it.
"""

from __future__ import annotations

import gzip
import hashlib
import lzma
import os
import shutil
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARCHIVE = ROOT / "fixtures" / "archive"
CHUNK = 1 << 20


def cache_root() -> Path:
    """Where unpacked copies live: one folder per checkout (two worktrees never share copies)."""
    env = os.environ.get("ADVISOR_ARCHIVE_CACHE")
    if env:
        return Path(env)
    tag = hashlib.sha1(str(ROOT).encode()).hexdigest()[:10]
    return Path(tempfile.gettempdir()) / f"advisor-archive-{tag}"


def is_trace(path: Path) -> bool:
    """An archived trace (stored as xz, read as gzip): ``trace*.json.xz``, ``*.sqlite.xz``. Other
    ``.xz`` files (a run's saved results, ``capture_rank0.json.xz``) were written so by the run
    and are copied as they are."""
    name = path.name
    return name.endswith(".sqlite.xz") or (name.startswith("trace") and name.endswith(".json.xz"))


def stored(path: Path) -> Path:
    """The archived file behind ``path``: itself, or the ``.xz`` that stands for a ``.gz``."""
    if path.exists() or path.suffix != ".gz" or not is_trace(path.with_suffix(".xz")):
        return path
    return path.with_suffix(".xz")


def _fresh(src: Path, dst: Path) -> bool:
    stamp = dst.with_name(dst.name + ".src")
    st = src.stat()
    return dst.exists() and stamp.exists() and stamp.read_text() == f"{st.st_size} {st.st_mtime_ns}"


def _copy_one(src: Path, dst: Path) -> None:
    """``src`` (an archived file) as ``dst``: an ``.xz`` trace re-gzipped, anything else copied."""
    if _fresh(src, dst):
        return
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
    if is_trace(src):
        with lzma.open(src, "rb") as fin, gzip.open(tmp, "wb", compresslevel=1) as fout:
            shutil.copyfileobj(fin, fout, CHUNK)
    else:
        shutil.copyfile(src, tmp)
    os.replace(tmp, dst)
    st = src.stat()
    dst.with_name(dst.name + ".src").write_text(f"{st.st_size} {st.st_mtime_ns}")


def _target(src: Path) -> Path:
    rel = src.relative_to(ARCHIVE)
    if is_trace(src):
        rel = rel.with_suffix(".gz")
    return cache_root() / rel


def archived(rel: str | Path) -> Path:
    """A path under ``fixtures/archive`` (``"unprofiled/h100-2026-11-23d/run1"``, or a trace
    named as it was captured, ``".../trace_rank0.json.gz"``) as a readable copy (see the module
    docstring). A folder comes back whole; a missing path is an error here, not a skipped test."""
    path = ARCHIVE / rel
    src = stored(path)
    if not src.exists():
        raise FileNotFoundError(f"{path}: not in the archive (fixtures/archive/README.md)")
    if src.is_dir():
        for f in sorted(p for p in src.rglob("*") if p.is_file()):
            _copy_one(f, _target(f))
        return cache_root() / src.relative_to(ARCHIVE)
    _copy_one(src, _target(src))
    return _target(src)


def readable(path: Path) -> Path:
    """``path`` as advisor can read it: under the archive, the unpacked copy (`archived`);
    anywhere else, itself."""
    try:
        rel = path.resolve().relative_to(ARCHIVE)
    except ValueError:
        return path
    return archived(rel)
