"""`advisor gate` over two distributed jobs: the job's step, the rank and the collective."""

from __future__ import annotations

from advisor.cli import main
from tests.conftest import shared


def _job_dir(tmp_path, name):
    d = tmp_path / name
    d.mkdir()
    (d / "job.sqlite").symlink_to(shared(f"nsys-ai/mfu_2gpu_{name}.sqlite"))
    return d


def test_gate_on_two_gpu_jobs_names_rank_and_collective(tmp_path, capsys):
    before, after = _job_dir(tmp_path, "before"), _job_dir(tmp_path, "after")
    # the "after" capture's job step is ~16% longer (19.4 vs 16.7 ms) over 14 steps each
    rc = main(["gate", str(before), str(after)])
    out = capsys.readouterr().out
    assert rc == 1, out
    assert out.startswith("FAIL: job step") and "rank " in out and "SendRecv" in out
    assert main(["gate", str(after), str(before)]) == 0
