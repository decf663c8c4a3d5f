"""The trace store: fixtures' compressed traces live in git's object store, not in the checkout.

Why: the tracked tree travels whole to the GPU machine for every device call, and that copy is
capped at 64 MiB; the compressed traces under ``fixtures/`` (``*.gz``, ``*.xz``: 111 MB in 385
files when they left the tree) are what the tests and benchmarks read, never what a device run
needs. They stay in the repository, as the blobs of the commits that added them, so a clone
holds every byte and git's own hash checks it; ``fixtures/store.json`` lists each trace's path,
blob id and size, and ``fixtures/.gitignore`` keeps the checked-out copies untracked (ignored
files do not travel). Git LFS would do the same with a server this project does not have.

``restore()`` writes every listed trace that is missing or of the wrong size into its place,
from one ``git cat-file --batch`` (about a second for all of them); the test session calls it
first (`tests/conftest.py`), and benchmarks or a user run it by hand::

    python -m tests.fixture_store            # check out the traces (what pytest does itself)
    python -m tests.fixture_store --store    # move newly committed traces into the store

Adding a trace: commit it as usual (``git add -f`` past the ignore file), then run
``--store``: it records the committed blob in ``store.json`` and untracks the file; commit that.
The blob stays reachable from the history, which is what a restore reads. A shallow clone lacks
those commits: restore then says so in one line (``git fetch --unshallow`` mends it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
STORE = FIXTURES / "store.json"
STORED_SUFFIXES = (".gz", ".xz")
"""What goes to the store: every compressed file under fixtures/ (traces, archived results)."""


class StoreError(RuntimeError):
    """A trace cannot be checked out (not a git checkout, a shallow clone, a corrupt index)."""


def _git(*args: str, stdin: bytes | None = None) -> bytes:
    try:
        done = subprocess.run(["git", *args], cwd=ROOT, input=stdin, capture_output=True)
    except FileNotFoundError as exc:
        raise StoreError("git is not installed: the fixture traces are read from the "
                         "repository's objects (tests/fixture_store.py)") from exc
    if done.returncode != 0:
        raise StoreError(f"git {args[0]} failed: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout


def load_index() -> dict[str, dict[str, object]]:
    """``{path relative to fixtures/: {"blob": sha, "size": bytes}}``."""
    return json.loads(STORE.read_text(encoding="utf-8"))["files"]


def _write_index(files: dict[str, dict[str, object]]) -> None:
    doc = {"about": "fixtures' compressed traces, kept in git's object store; "
                    "tests/fixture_store.py checks them out",
           "files": dict(sorted(files.items()))}
    STORE.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


def missing(files: dict[str, dict[str, object]] | None = None) -> list[str]:
    """Listed traces absent from the checkout or of another size than stored."""
    files = load_index() if files is None else files
    out = []
    for rel, meta in files.items():
        path = FIXTURES / rel
        try:
            if path.stat().st_size == meta["size"]:
                continue
        except FileNotFoundError:
            pass
        out.append(rel)
    return out


def restore() -> int:
    """Check out every listed trace that is not in place; how many were written. Safe to run
    from several processes at once (each file is written under a private name, then renamed)."""
    files = load_index()
    todo = missing(files)
    if not todo:
        return 0
    request = "".join(f"{files[rel]['blob']}\n" for rel in todo).encode()
    try:
        out = _git("cat-file", "--batch", stdin=request)
    except StoreError as exc:
        raise StoreError(f"{exc} (fixture traces are checked out of git: tests/fixture_store.py)") \
            from exc
    pos = 0
    for rel in todo:
        header_end = out.index(b"\n", pos)
        header = out[pos:header_end].decode().split()
        if len(header) < 3 or header[1] != "blob":
            raise StoreError(f"fixtures/{rel}: blob {files[rel]['blob']} is not in this clone "
                             "(a shallow clone? run `git fetch --unshallow`)")
        size = int(header[2])
        body = out[header_end + 1:header_end + 1 + size]
        pos = header_end + 1 + size + 1  # the blob, then a newline
        if size != files[rel]["size"]:
            raise StoreError(f"fixtures/{rel}: stored blob has {size} bytes, the index says "
                             f"{files[rel]['size']}")
        path = FIXTURES / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(body)
        os.replace(tmp, path)
    return len(todo)


def store() -> list[str]:
    """Move every compressed file tracked under fixtures/ into the store: record the blob that
    HEAD holds (the file must be committed unchanged) and untrack the file. Returns the paths."""
    listed = _git("ls-tree", "-r", "-z", "--long", "HEAD", "--", "fixtures").decode()
    dirty = set(_git("diff", "--name-only", "-z", "HEAD", "--", "fixtures").decode().split("\0"))
    files = load_index() if STORE.exists() else {}
    moved = []
    for entry in filter(None, listed.split("\0")):
        meta, path = entry.split("\t", 1)
        _mode, kind, blob, size = meta.split()
        if kind != "blob" or not path.endswith(STORED_SUFFIXES):
            continue
        if path in dirty:
            raise StoreError(f"{path} differs from HEAD: commit it first, then --store")
        files[str(Path(path).relative_to("fixtures"))] = {"blob": blob, "size": int(size)}
        moved.append(path)
    if moved:
        _write_index(files)
        _git("rm", "--cached", "-q", "--", *moved)
    return moved


def main(argv: list[str]) -> int:
    try:
        if argv == ["--store"]:
            moved = store()
            print(f"{len(moved)} traces moved into fixtures/store.json; commit it")
        elif not argv:
            print(f"{restore()} fixture traces checked out of git")
        else:
            print("usage: python -m tests.fixture_store [--store]", file=sys.stderr)
            return 2
    except StoreError as exc:
        print(f"fixture_store: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
