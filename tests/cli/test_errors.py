"""Bad input gets one line on stderr and exit code 2, never a traceback; inputs are untouched."""

from __future__ import annotations

import gzip
import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from advisor.cli import main
from tests.conftest import SCENARIOS, shared

REAL_SQLITE = "nsys-ai/mfu_2gpu_before.sqlite"
REAL_JSON = "hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"


def run(*args: str) -> subprocess.CompletedProcess:
    """``advisor ARGS`` in-process: `advisor.cli.main`, the one funnel every error goes through,
    with stdout and stderr captured apart (click's runner isolation). A traceback that escaped
    it would fail the test as an exception. That the installed command exits with the code
    `main` returns, in a process of its own, is tests/cli/test_exit.py's."""
    with CliRunner().isolation() as (out, err, _):
        code = main(list(args))
    return subprocess.CompletedProcess(args, code, out.getvalue().decode(errors="replace"),
                                       err.getvalue().decode(errors="replace"))


def assert_one_line_error(p: subprocess.CompletedProcess, needle: str) -> None:
    assert p.returncode == 2, p.stderr
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("advisor: error:") and needle in lines[0], lines[0]
    assert "Traceback" not in p.stderr


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_missing_file(tmp_path):
    assert_one_line_error(run("analyze", str(tmp_path / "nope.sqlite")), "no such file")


def test_directory(tmp_path):
    # a folder is a job of one trace per rank (issue 18); one without traces is a one-line error
    assert_one_line_error(run("analyze", str(tmp_path)), "a folder with no trace files")


def test_empty_file(tmp_path):
    f = tmp_path / "empty.sqlite"
    f.write_bytes(b"")
    assert_one_line_error(run("analyze", str(f)), "empty")


def test_text_file_is_not_a_trace(tmp_path):
    f = tmp_path / "notes.txt"
    f.write_text("hello\n")
    assert_one_line_error(run("analyze", str(f)), "not an Nsight Systems SQLite export")


def test_truncated_sqlite(tmp_path):
    f = tmp_path / "cut.sqlite"
    data = shared(REAL_SQLITE).read_bytes()
    f.write_bytes(data[: len(data) // 3])
    before = sha(f)
    assert_one_line_error(run("analyze", str(f)), "truncated or corrupt")
    assert sha(f) == before


def test_truncated_gzipped_json(tmp_path):
    f = tmp_path / "cut.json.gz"
    data = shared(REAL_JSON).read_bytes()
    f.write_bytes(data[: len(data) // 2])
    assert_one_line_error(run("analyze", str(f)), "cut.json.gz")


def test_nsys_rep_says_how_to_export(tmp_path):
    src = shared("nvfuser/64ee035/report1.nsys-rep")
    f = tmp_path / "report1.nsys-rep"
    shutil.copy(src, f)
    assert_one_line_error(run("analyze", str(f)), "nsys export --type sqlite")


def test_traceback_flag_shows_the_traceback(tmp_path):
    p = run("--traceback", "analyze", str(tmp_path / "nope.sqlite"))
    assert p.returncode == 2 and "Traceback" in p.stderr


def test_unwritable_report_path_is_a_one_line_error(tmp_path):
    p = run("analyze", str(shared(REAL_SQLITE)), "--quiet", "--json", str(tmp_path / "no" / "r.json"))
    assert_one_line_error(p, "cannot write")


def test_valid_trace_is_analysed_and_left_unchanged(tmp_path):
    src = SCENARIOS / "host-sync" / "bad" / "nsys.sqlite.gz"
    f = tmp_path / "run.sqlite"
    with gzip.open(src, "rb") as a, f.open("wb") as b:
        shutil.copyfileobj(a, b)
    before = sha(f)
    out = tmp_path / "r.json"
    p = run("analyze", str(f), "--json", str(out), "--html", str(tmp_path / "r.html"))
    assert p.returncode == 0, p.stderr
    assert out.exists() and (tmp_path / "r.html").exists()
    assert sha(f) == before
    assert sorted(x.name for x in tmp_path.iterdir()) == ["r.html", "r.json", "run.sqlite"]


@pytest.mark.parametrize("args, needle", [
    (["analyze"], "Missing argument 'TRACES...'"),
    (["analyze", "--bogus", "x"], "No such option '--bogus'"),
    (["analyze", "x", "--max-steps", "0"], "'--max-steps': 0 is not in the range"),
    (["gate", "a", "b", "--threshold", "nan"], "'--threshold': 'nan' is not a finite number"),
    (["bogus"], "No such command 'bogus'"),
])
def test_usage_errors_are_one_line_and_exit_2(args, needle):
    """click's own block is four lines (usage, "Try --help", blank, error): one line here, as
    for every other error, naming where the help is (a fuzzing pass found the four)."""
    p = run(*args)
    assert_one_line_error(p, needle)
    assert "--help')" in p.stderr


@pytest.mark.parametrize("kind", ["device link", "fifo", "dangling link", "folder"])
def test_a_rank_that_is_not_a_regular_file_is_an_error_not_a_rank_fewer(tmp_path, kind):
    """A job's folder (or glob) holding rank1.json as a link to /dev/zero, a FIFO, a dangling
    link or a folder: the job read one rank fewer without a word (a fuzzing pass); named alone
    the same file is a one-line error, and so it is in a folder."""
    import os

    job = tmp_path / "job"
    job.mkdir()
    shutil.copy(shared(REAL_JSON), job / "rank0.json.gz")
    bad = job / "rank1.json"
    if kind == "device link":
        bad.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(bad)
    elif kind == "dangling link":
        bad.symlink_to(tmp_path / "gone.json")
    else:
        bad.mkdir()
    for given in (str(job), str(job / "rank*")):
        assert_one_line_error(run("analyze", given), "rank1.json")
