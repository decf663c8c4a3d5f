"""`advisor analyze` on the folder `advisor profile` wrote: the natural next step.

The folder holds the rank trace beside advisor's own side files (capture status, analysis, step
clock). They are skipped and named once; a stray JSON of the user's is skipped the same way; a
file that is a trace but cannot be read stops the job with one line naming it, and nothing of
Dask's worker logging reaches the terminal. Progress lines appear only on a terminal.
"""

from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.capture.test_profile_cpu import SCRIPTS, advisor
from tests.conftest import HANG_GUARD_S

DASK_NOISE = ("distributed.", "Compute Failed", "Traceback", "ranks summarised")


@pytest.fixture(scope="module")
def profiled(tmp_path_factory) -> Path:
    """A real `advisor profile` run of a tiny CPU training loop; its output folder."""
    work = tmp_path_factory.mktemp("profiled")
    # --wait pins the window: the settle rule may want more steps than this tiny loop has
    done = advisor("profile", "-q", "--wait", "5", str(SCRIPTS / "train_mlp.py"), cwd=work)
    assert done.returncode == 0, done.stderr
    out = work / "advisor-out"
    assert (out / "trace_rank0.json.gz").is_file() and (out / "capture_rank0.json").is_file()
    return out


def _copy(folder: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "run"
    shutil.copytree(folder, dst)
    return dst


def _analyze(folder: Path) -> subprocess.CompletedProcess[str]:
    # stderr is a pipe here, as in a CI log: no progress lines may appear on it
    return advisor("analyze", "--workers", "1", str(folder))


def test_advisors_own_files_are_skipped_and_named(profiled, tmp_path):
    run = _copy(profiled, tmp_path)
    own = sorted(p.name for p in run.glob("*.json"))
    assert len(own) >= 3
    (run / "config.json").write_text('{"lr": 0.1, "epochs": 3}')  # the user's own JSON
    done = _analyze(run)
    assert done.returncode == 0, done.stderr
    assert not any(n in done.stderr for n in DASK_NOISE), done.stderr
    text = " ".join(done.stdout.split())
    assert "Job: 1 ranks" in text
    assert "skipped" in text and "config.json" in text
    for name in own:
        assert name in text


def test_a_trace_that_cannot_be_read_is_one_line_naming_it(profiled, tmp_path):
    run = _copy(profiled, tmp_path)
    whole = gzip.decompress((run / "trace_rank0.json.gz").read_bytes())
    (run / "trace_rank1.json").write_bytes(whole[: len(whole) // 2])  # a truncated rank trace
    done = _analyze(run)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("advisor: error:"), done.stderr
    assert "trace_rank1.json" in lines[0]
    assert not any(n in done.stderr for n in DASK_NOISE)


def test_a_folder_of_only_side_files_says_why_it_has_no_trace(profiled, tmp_path):
    run = _copy(profiled, tmp_path)
    (run / "trace_rank0.json.gz").unlink()
    done = _analyze(run)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "no trace files" in line and "capture_rank0.json" in line


def test_a_named_file_that_is_no_trace_is_still_an_error(profiled, tmp_path):
    """Skipping is for what a folder or a glob found: a file named on purpose is read."""
    run = _copy(profiled, tmp_path)
    done = advisor("analyze", str(run / "capture_rank0.json"))
    assert done.returncode == 2 and "capture_rank0.json" in done.stderr


def test_progress_lines_only_on_a_terminal(profiled, tmp_path):
    """Under a pseudo-terminal the job path shows its progress; piped (above) it shows none."""
    import os
    import pty

    run = _copy(profiled, tmp_path)
    master, slave = pty.openpty()
    env = dict(os.environ, COLUMNS="80")
    from tests.capture.test_profile_cpu import _env

    env.update(_env())
    proc = subprocess.Popen([sys.executable, "-m", "advisor.cli", "analyze", "--workers", "1",
                             "--json", str(tmp_path / "job.json"), str(run)],
                            stdout=subprocess.DEVNULL, stderr=slave, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    assert proc.wait(timeout=HANG_GUARD_S) == 0
    os.close(master)
    assert b"ranks summarised" in b"".join(chunks)
