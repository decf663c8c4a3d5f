"""`fixtures/manifest.toml` and the tree agree: every trace outside the archive is listed with a
purpose, every listed file exists, and the archive holds no trace advisor could read directly
(its traces are ``.xz``, read through `tests.archive`)."""

from __future__ import annotations

import subprocess

import pytest

from tests.archive import ARCHIVE, archived
from tests.fixture_manifest import FIXTURES, FORMATS, ROOT, TRACE_SUFFIXES, fixtures


def _tracked(under) -> list[str]:
    """Files git tracks under a folder (what a checkout has; an untracked scratch file is not a
    fixture), relative to fixtures/."""
    out = subprocess.run(["git", "ls-files", "-z", "--", str(under)], cwd=ROOT,
                         capture_output=True, check=True).stdout.decode()
    return sorted(str((ROOT / p).relative_to(FIXTURES)) for p in out.split("\0") if p)


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
