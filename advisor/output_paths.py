"""Where reports go: every output path checked before any work, every file written atomically.

A report written over the trace it was made from destroys the user's data (`advisor analyze
x.json.gz --json x.json.gz`); a report that fails after an hour of profiling wastes the hour;
a half-written file, or last run's file left in place, lets CI read a stale verdict. So:

* `check_outputs` resolves each requested output before anything runs and refuses (exit 2) one
  that is an input (also through a link or another spelling of the path), a directory, the same
  file as another output, or in a directory that is missing or that we cannot create files in
  (tried for real: permission bits say nothing for root or on read-only mounts).
* `write_atomic` writes a temporary file beside the output and renames it over the output, so
  the output is either the old file or the complete new one, never a torn mix.

``-`` means standard output; it is refused only when standard output is closed.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from advisor.errors import OutputError

STDOUT = "-"


def is_stdout(path: Path | str | None) -> bool:
    return path is not None and str(path) == STDOUT


def _identity(path: Path) -> tuple[str, tuple[int, int] | None]:
    """The resolved path and, when it exists, its (device, inode): two spellings, one file."""
    resolved = os.path.realpath(path)
    try:
        st = os.stat(resolved)
    except OSError:
        return resolved, None
    return resolved, (st.st_dev, st.st_ino)


def _same(a: tuple[str, tuple[int, int] | None], b: tuple[str, tuple[int, int] | None]) -> bool:
    return a[0] == b[0] or (a[1] is not None and a[1] == b[1])


def _check_stdout(option: str) -> None:
    """Refuse ``-`` when standard output is closed (``>&-``): Python then has no stdout at
    all, and the report would vanish with exit 0."""
    stream = sys.stdout
    try:
        if stream is not None:
            os.fstat(stream.fileno())
            return
    except (AttributeError, ValueError, io.UnsupportedOperation):
        return  # not a descriptor (a caller's own stream, as in tests): it takes writes
    except OSError:
        pass
    raise OutputError(f"{option} -: standard output is closed; give a file name")


def _check_one(option: str, path: Path) -> None:
    try:
        if path.is_dir():
            raise OutputError(f"{option} {path}: cannot write: is a directory; give a file name")
        parent = path.parent if str(path.parent) else Path(".")
        if not parent.exists():
            raise OutputError(f"{option} {path}: cannot write: directory {parent} does not exist")
        if not parent.is_dir():
            raise OutputError(f"{option} {path}: cannot write: {parent} is not a directory")
        if path.exists() and not path.is_file():
            raise OutputError(f"{option} {path}: cannot write: not a regular file")
        fd, probe = tempfile.mkstemp(dir=parent, prefix=f".{path.name[:64]}.", suffix=".probe")
        os.close(fd)
        os.unlink(probe)
    except OutputError:
        raise
    except OSError as e:
        raise OutputError(f"{option} {path}: cannot write ({e.strerror or e})") from e


def check_outputs(inputs: Iterable[Path | str], outputs: Mapping[str, Path | None]) -> None:
    """Refuse, before any work, outputs that would overwrite an input or cannot be written.

    ``outputs`` maps the option that named it (``--json``) to the path (None: not asked)."""
    try:
        ins = [_identity(Path(p)) for p in inputs]
    except OSError:  # an unresolvable input path is the input check's to report
        ins = []
    seen: list[tuple[str, tuple[str, tuple[int, int] | None]]] = []
    for option, path in outputs.items():
        if is_stdout(path):
            _check_stdout(option)
            continue
        if path is None:
            continue
        try:
            ident = _identity(Path(path))
        except OSError as e:
            raise OutputError(f"{option} {path}: cannot write ({e.strerror or e})") from e
        if any(_same(ident, i) for i in ins):
            raise OutputError(f"{option} {path}: is an input of this command; refusing to "
                              "overwrite it (give another file name)")
        for other, other_ident in seen:
            if _same(ident, other_ident):
                raise OutputError(f"{option} {path}: also given to {other}; give each output "
                                  "its own file")
        _check_one(option, Path(path))
        seen.append((option, ident))


def replace_file(path: Path | str, data: str | bytes) -> None:
    """Write ``data`` to a new file beside ``path`` and rename it over ``path``: readers never
    see half a file, and a link planted at ``path`` is replaced, not followed. OSError as is."""
    path = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    parent = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{path.name[:64]}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # as a plain open() would have created it
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_atomic(path: Path | str, data: str | bytes) -> None:
    """`replace_file`, its failure a one-line `OutputError`."""
    try:
        replace_file(path, data)
    except OSError as e:
        raise OutputError(f"cannot write {path}: {e.strerror or e}") from e
