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


def test_job_gate_fails_closed_on_file_outputs(tmp_path, capsys):
    """A job gate writes no verdict files: each requested one gets the error verdict, so CI never
    reads an earlier run's "pass" from it, and the gate exits 2."""
    import json

    before, after = _job_dir(tmp_path, "before"), _job_dir(tmp_path, "after")
    out = tmp_path / "verdict.json"
    out.write_text(json.dumps({"status": "pass"}))
    rc = main(["gate", str(before), str(after), "--json", str(out)])
    assert rc == 2 and "not available when comparing jobs" in capsys.readouterr().err
    assert json.loads(out.read_text())["status"] != "pass"
