"""`advisor profile --try` on a multi-process job: the trials run under the job's own torchrun
line, every rank runs every trial and stops after the same step, the job's step is the slowest
rank's, and one rank's failure fails the trial with that rank's reason.

A real two-process gloo job on the CPU (`scripts/ddp_try.py`: DDP over a DistributedSampler,
one all-reduce per step), profiled and tried once; the device script
`benchmarks/public/wave5_ddp_try.sh` does the same with nanoGPT on two H100s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import HANG_GUARD_S

torch = pytest.importorskip("torch", reason="advisor profile needs torch (the profile extra)")

from advisor.capture.options import ProfileOptions  # noqa: E402
from advisor.capture.settle import SETTLE_MAX_WAIT  # noqa: E402
from advisor.capture.trial import TrialOptions, job_result  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).resolve().parent / "scripts" / "ddp_try.py"
DDP = "ddp:bucket_cap_mb=50:gradient_as_bucket_view=true"
LOADER = "loader:num_workers=1"
STEPS = 3


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """One `advisor profile --try` of a 2-rank DDP job: a DDP constructor knob, and a loader
    knob under which rank 1 raises. ``--wait 2`` pins the window, so the profiled job stops
    after it on both ranks at the same step."""
    cwd = tmp_path_factory.mktemp("trymulti")
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run(
        [sys.executable, "-m", "advisor.cli", "profile", "--wait", "2", "--steps", "4",
         "--try", f"{DDP},{LOADER}", "--try-runs", "1", "--try-steps", str(STEPS),
         "--json", "report.json", "torchrun", "--standalone", "--nproc-per-node", "2",
         str(SCRIPT), "--iters", "70", "--raise-on-rank", "1", "--observe", "seen"],
        capture_output=True, text=True, env=env, cwd=cwd, timeout=HANG_GUARD_S)
    assert done.returncode == 0, done.stderr[-4000:]
    return cwd, done, json.loads((cwd / "report.json").read_text())["tried"]


def ranks_of(cwd: Path, tag: str) -> dict[int, dict]:
    found = sorted((cwd / "advisor-out" / "try").glob(f"{tag}*.result.rank*.json"))
    return {json.loads(p.read_text())["rank"]: json.loads(p.read_text()) for p in found}


def test_every_rank_runs_every_trial_under_the_launcher(job):
    cwd, _, tried = job
    assert tried["order"] == ["warm-up", "plain", DDP, LOADER]
    for tag in ("01-warm-up", "02-plain", "03-ddp", "04-loader"):
        assert sorted(ranks_of(cwd, tag)) == [0, 1], tag
    # the DDP knob reached DistributedDataParallel in both ranks' processes
    for rank, res in ranks_of(cwd, "03-ddp").items():
        assert res["applied"] == ["DistributedDataParallel(bucket_cap_mb=50.0, "
                                  "gradient_as_bucket_view=True)"], rank
        seen = [json.loads(line) for line in (cwd / f"seen.rank{rank}.jsonl").read_text().splitlines()]
        assert {"bucket_cap_mb": 50.0, "gradient_as_bucket_view": True} in [s["ddp"] for s in seen]


def test_every_rank_stops_after_the_same_step(job):
    cwd, _, _ = job
    for tag in ("01-warm-up", "02-plain", "03-ddp"):
        ranks = ranks_of(cwd, tag)
        assert {r["stopped_at"] for r in ranks.values()} == {SETTLE_MAX_WAIT + STEPS}, tag
        assert all(r["status"] == "ok" and r["steps_timed"] >= STEPS for r in ranks.values())


def test_the_jobs_step_is_the_slowest_ranks(job):
    cwd, _, tried = job
    plain = max(r["mean_ns"] for r in ranks_of(cwd, "02-plain").values())
    fixed = max(r["mean_ns"] for r in ranks_of(cwd, "03-ddp").values())
    assert tried["plain_step_ms"] == [pytest.approx(plain / 1e6, abs=1e-3)]
    ddp = tried["fixes"][0]
    assert ddp["status"] == "measured" and ddp["step_ms"] == pytest.approx(fixed / 1e6, abs=1e-3)
    assert ddp["measured_speedup"] == pytest.approx(plain / fixed, abs=1e-3)
    assert "the job's the slowest rank's" in tried["statistic"]


def test_a_rank_that_fails_fails_the_trial_with_its_reason(job):
    _, done, tried = job
    loader = tried["fixes"][1]
    assert loader["status"] == "failed"
    assert loader["reason"].startswith(
        "rank 1: RuntimeError: rank 1 cannot load with worker processes"), loader["reason"]
    assert "rank 1 cannot load with worker processes" in " ".join(done.stderr.split())


def test_without_a_pinned_window_the_job_runs_to_its_end_then_the_trials(tmp_path):
    """No ``--wait``: each rank's window opens where its step time settles, so the profiled
    job is not stopped after it (the ranks would stop at different steps); it runs to its
    end, and the trials follow."""
    done = subprocess.run(
        [sys.executable, "-m", "advisor.cli", "profile", "--try", "ddp:bucket_cap_mb=50",
         "--try-runs", "1", "--try-steps", str(STEPS), "--json", "report.json", "torchrun",
         "--standalone", "--nproc-per-node", "2", str(SCRIPT), "--iters", "60"],
        capture_output=True, text=True, cwd=tmp_path, timeout=HANG_GUARD_S,
        env={**os.environ, "OMP_NUM_THREADS": "1",
             "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")})
    assert done.returncode == 0, done.stderr[-4000:]
    assert "the job runs to its end" in done.stderr
    assert done.stdout.count("done 60 iterations") == 2  # the profiled job, not stopped
    tried = json.loads((tmp_path / "report.json").read_text())["tried"]
    assert tried["order"] == ["warm-up", "plain", "ddp:bucket_cap_mb=50"]
    assert tried["fixes"][0]["status"] == "measured", tried["fixes"][0]


def _stop_step(world: int, warming: int) -> tuple[int | None, int | None]:
    """Drive a trial's session through real step boundaries of 10 ms; the first ``warming``
    steps take longer step by step (a rank still warming up). Returns (settled at, stopped after).
    10 ms, not 2: on a loaded 2-core machine a 2 ms sleep overran by enough (a CI run,
    2026-12-03) that eight-step means of the steady rank differed by more than the 10% a settled
    step allows, and it settled no earlier than the warming one."""
    import time

    from advisor.capture.capture_state import StopAfterWindow
    from advisor.capture.knobs import KnobApplier
    from advisor.capture.trial_child import TrialSession

    sess = TrialSession(KnobApplier([]), STEPS, 60.0, 0, world)
    try:
        for n in range(200):
            time.sleep(10e-3 + (n * 1e-3 if n < warming else 0))  # a step's work
            sess.boundary()
    except StopAfterWindow:
        pass
    return sess.state.settled_at, sess.stopped_at


def test_ranks_that_settle_at_different_steps_stop_after_the_same_one():
    early, late = _stop_step(2, 0), _stop_step(2, 30)
    assert early[0] < late[0]  # they settled at different steps...
    assert early[1] == late[1] == SETTLE_MAX_WAIT + STEPS  # ...and stop after the same one
    alone = _stop_step(1, 0)  # one process: as soon as its own steps are timed
    assert alone[1] == alone[0] + STEPS


def test_job_result_takes_the_slowest_rank_and_the_first_failure():
    ok = {"status": "ok", "world": 2, "applied": ["x"], "reason": None}
    fast = {**ok, "rank": 0, "mean_ns": 5.0, "run_mean_ns": 6.0}
    slow = {**ok, "rank": 1, "mean_ns": 9.0, "run_mean_ns": 7.0}
    res = job_result({0: fast, 1: slow}, 0, Path("log"))
    assert (res["status"], res["mean_ns"], res["run_mean_ns"], res["slowest_rank"]) == (
        "ok", 9.0, 7.0, 1)
    # rank 1 failed first; rank 0 failed after it, in the collective rank 1 had left
    cause = {**slow, "status": "failed", "reason": "ValueError: bad", "ended_unix": 10.0}
    after = {**fast, "status": "failed", "reason": "RuntimeError: peer closed",
             "ended_unix": 11.0}
    assert job_result({0: after, 1: cause}, 1, Path("log"))["reason"] == "rank 1: ValueError: bad"
    missing = job_result({0: fast}, 1, Path("log"))
    assert missing["status"] == "failed" and missing["reason"].startswith("rank 1 ended without")
    assert job_result({}, 1, Path("log"))["status"] == "failed"


def test_the_profiled_job_stops_only_where_every_rank_stops_alike():
    from advisor.capture.launch import worker_options

    auto = ProfileOptions(then="stop", trial=TrialOptions())
    assert worker_options(auto).then == "continue"  # windows open where each rank settles
    assert worker_options(ProfileOptions(then="stop", wait=5, trial=TrialOptions())).then == "stop"
    assert worker_options(ProfileOptions(then="stop")).then == "stop"  # no --try: as before


def test_try_refuses_a_multi_node_job_before_it_runs(tmp_path):
    from advisor.capture.launch import parse_launch, torchrun
    from advisor.errors import CaptureError

    assert parse_launch(["--standalone", "--nproc-per-node", "2", "t.py"]).one_node
    opts = ProfileOptions(then="stop", out=tmp_path, trial=TrialOptions())
    with pytest.raises(CaptureError, match="one-node torchrun job"):
        torchrun(opts, ["--nnodes", "2", "--nproc-per-node", "2", str(SCRIPT)])
    assert not list(tmp_path.iterdir())  # nothing ran
