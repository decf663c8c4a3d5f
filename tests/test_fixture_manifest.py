"""`fixtures/manifest.toml` and the tree agree: every trace outside the archive is listed with a
purpose, every listed file exists, and the archive holds no trace advisor could read directly
(its traces are ``.xz``, read through `tests.archive`). "The tree" is the tracked files and the
traces of the store (`tests.fixture_store`), which pytest has checked out before this runs."""

from __future__ import annotations

import subprocess

import pytest

from tests.archive import ARCHIVE, archived
from tests.fixture_manifest import FIXTURES, FORMATS, ROOT, TRACE_SUFFIXES, fixtures
from tests.fixture_store import STORED_SUFFIXES, load_index, missing


def _tracked(under) -> list[str]:
    """The fixtures under a folder, relative to fixtures/: the files git tracks and the traces
    of the store (an untracked scratch file is not a fixture)."""
    out = subprocess.run(["git", "ls-files", "-z", "--", str(under)], cwd=ROOT,
                         capture_output=True, check=True).stdout.decode()
    tracked = {str((ROOT / p).relative_to(FIXTURES)) for p in out.split("\0") if p}
    prefix = "" if under == FIXTURES else str(under.relative_to(FIXTURES)) + "/"
    return sorted(tracked | {p for p in load_index() if p.startswith(prefix)})


def test_the_stores_traces_are_checked_out_and_none_is_tracked():
    """Every trace the store lists is in place (pytest restored it) and no compressed file under
    fixtures/ is tracked: it would travel with the tree to the GPU machine."""
    assert missing() == []
    tracked = subprocess.run(["git", "ls-files", "-z", "--", str(FIXTURES)], cwd=ROOT,
                             capture_output=True, check=True).stdout.decode().split("\0")
    assert [p for p in tracked if p.endswith(STORED_SUFFIXES)] == [], \
        "run python -m tests.fixture_store --store after committing a trace (fixtures/README.md)"


def test_every_trace_outside_the_archive_is_listed_once():
    listed = [f.path for f in fixtures()]
    assert len(listed) == len(set(listed)), "a trace is listed twice"
    on_disk = {p for p in _tracked(FIXTURES) if p.endswith(TRACE_SUFFIXES)
               and not p.startswith("archive/")}
    assert on_disk - set(listed) == set(), "add these to fixtures/manifest.toml (README says how)"
    assert set(listed) - on_disk == set(), "listed in fixtures/manifest.toml but not in the tree"


@pytest.mark.parametrize("entry", fixtures(), ids=lambda f: f.path)
def test_each_entry_says_what_it_is_and_what_backs_it(entry):
    assert entry.format in FORMATS
    assert ("sqlite" in entry.path) == (entry.format == "nsys-sqlite")
    assert len(entry.purpose) > 20, "say why the suite needs this trace"
    for m in entry.measured:
        assert (FIXTURES / m).exists(), f"{entry.path}: measured figures {m} are missing"


def test_the_archive_keeps_its_traces_out_of_reach_of_a_sweep():
    files = _tracked(ARCHIVE)
    assert "archive/README.md" in files
    assert not [p for p in files if p.endswith(TRACE_SUFFIXES)], \
        "archive traces are stored as .xz (xz -9), see fixtures/archive/README.md"


def test_an_archived_trace_reads_back_as_the_capture_wrote_it():
    from advisor.ingest.base import load_trace

    run = archived("unprofiled/h100-2026-11-23d/run3/host-sync-nsys")
    assert (run / "steps_rank0.json").is_file()
    graph = load_trace(run / "nsys_rank0.sqlite.gz")
    assert graph.has_gpu_work


def test_a_trace_is_checked_out_of_git_byte_for_byte(tmp_path, monkeypatch):
    """The restore writes the stored blob into an empty fixtures folder, bytes equal to the
    checked-out copy, and a second restore finds nothing to do."""
    import tests.fixture_store as fs

    index = load_index()
    rel = min(index, key=lambda p: index[p]["size"])  # the smallest stored file
    (tmp_path / "store.json").write_text(fs.STORE.read_text())
    monkeypatch.setattr(fs, "FIXTURES", tmp_path)
    monkeypatch.setattr(fs, "STORE", tmp_path / "store.json")
    monkeypatch.setattr(fs, "load_index", lambda: {rel: index[rel]})
    assert fs.restore() == 1
    assert (tmp_path / rel).read_bytes() == (FIXTURES / rel).read_bytes()
    assert fs.restore() == 0
    monkeypatch.setattr(fs, "load_index", lambda: {rel: {"blob": "0" * 40, "size": 1}})
    (tmp_path / rel).unlink()
    with pytest.raises(fs.StoreError, match="not in this clone"):
        fs.restore()
