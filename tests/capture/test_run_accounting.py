"""The measured unprofiled step, the settled window and the whole-run account of
`advisor profile`, end to end on real (tiny) CPU training scripts, and their arithmetic."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.capture.accounting import MIN_RUN_SAVING
from advisor.capture.settle import SETTLE_BLOCK
from advisor.capture.steptimes import StepClock, measured_step

torch = pytest.importorskip("torch", reason="advisor profile needs torch (the profile extra)")

from tests.capture.test_profile_cpu import SCRIPTS, advisor  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def epochs_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("epochs")
    done = advisor("profile", "--steps", "5", "--out", str(out), "--json",
                   str(out / "r.json"), "--html", str(out / "r.html"),
                   str(SCRIPTS / "epochs.py"), "--epochs", "3", "--iters", "40",
                   "--out", str(out))
    assert done.returncode == 0, done.stderr
    return json.loads((out / "r.json").read_text()), done, out


def test_unprofiled_steps_are_measured_outside_the_window(epochs_run):
    report, _, _ = epochs_run
    m = report["steps"]["measured"]
    assert m is not None and m["count"] >= 3
    assert m["p10_ms"] <= m["median_ms"] <= m["p90_ms"]
    # the window (5 steps, no --wait: it starts once the step time settled) and its
    # neighbours are not among the measured steps
    assert m["first_step"] >= 2 * SETTLE_BLOCK


def test_the_whole_run_is_accounted_for(epochs_run):
    report, _, _ = epochs_run
    run = report["run"]
    # 3 epochs of 40 batches; steps run from one optimizer.step() to the next, and the last
    # one never ends: 119 complete steps
    assert run["steps"] == 3 * 40 - 1
    parts = run["parts_ms"]
    # every part is a piece of the run's wall time, and together they are all of it
    assert sum(parts.values()) == pytest.approx(run["run_ms"], rel=0.02)
    # 3 epochs: the training loader's workers start 3 times, 2 of them after the first
    assert run["loader_restarts"] == 2
    assert run["checkpoints"] == 3


def test_a_significant_restart_cost_is_a_run_relative_finding(epochs_run):
    """The persistent-workers fix is estimated against the settled loop's time per step, at the
    run's own rate of restarts, between the forks alone and the whole epoch start
    (`advisor.engine.loader_model.RestartCost`)."""
    report, _, _ = epochs_run
    found = {f["rule"]: f for f in report["findings"]}
    run = report["run"]
    assert run["loader_restart_ms"] > 0
    if "loader-restarts" in found:
        f = found["loader-restarts"]
        assert (f["relative_to"], f["category"]) == ("run", "input")
        assert "persistent_workers=True" in f["fix"]["snippet"]
        q = f["evidence"]["quantities"]
        per, steps = q["loop_step_ns"], q["run_steps"]
        assert q["loader_restart_ns"] == pytest.approx(run["loader_restart_ms"] * 1e6, abs=1e6)
        low = per / (per - q["loader_restart_fork_ns"] / steps)
        high = per / (per - q["loader_restart_ns"] / steps)
        assert low - 1e-3 <= f["estimated_speedup"] <= high + 1e-3
        assert f["estimated_speedup"] >= 1 / (1 - MIN_RUN_SAVING) - 1e-3


def test_an_evaluation_loader_s_first_start_is_not_a_restart(tmp_path):
    """Persistent workers save a loader's second and later starts, not another loader's first:
    3 epochs, each followed by an evaluation whose loader has a worker too. The training
    loader restarts twice, the evaluation's twice after its first start: 4 restarts, where
    counting every start after the run's first would say 5."""
    done = advisor("profile", "-q", "--steps", "4", "--out", str(tmp_path), "--json",
                   str(tmp_path / "r.json"), str(SCRIPTS / "epochs.py"), "--epochs", "3",
                   "--iters", "30", "--val-workers", "1", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["run"]["loader_restarts"] == 4


def test_persistent_workers_leave_nothing_to_restart(tmp_path):
    done = advisor("profile", "-q", "--steps", "4", "--out", str(tmp_path), "--json",
                   str(tmp_path / "r.json"), str(SCRIPTS / "epochs.py"), "--epochs", "3",
                   "--iters", "30", "--persistent", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["run"]["loader_restarts"] == 0
    assert "loader-restarts" not in {f["rule"] for f in report["findings"]}


def test_reports_show_the_measured_step_and_the_run(epochs_run):
    _, done, out = epochs_run
    assert "Unprofiled steps (host clock" in done.stderr
    assert "Whole run:" in done.stderr
    html = (out / "r.html").read_text()
    assert 'id="kpi-measured"' in html and 'id="whole-run"' in html


def test_pinned_wait_records_where_the_user_said(tmp_path):
    done = advisor("profile", "-q", "--wait", "2", "--steps", "3", "--out", str(tmp_path),
                   "--json", str(tmp_path / "r.json"), str(SCRIPTS / "train_mlp.py"),
                   "--iters", "30")
    assert done.returncode == 0, done.stderr
    m = json.loads((tmp_path / "r.json").read_text())["steps"]["measured"]
    # warm-up 0-1, the window 2-4 and its neighbours 1 and 5 are never measured (a far-out
    # step after it may be left out too, on a loaded machine)
    assert m["first_step"] >= 6


def test_too_few_steps_to_settle_says_how_to_pin(tmp_path):
    done = advisor("profile", "--out", str(tmp_path), str(SCRIPTS / "train_mlp.py"),
                   "--iters", "5")
    assert done.returncode == 2
    assert "--wait" in done.stderr and "settled" in done.stderr


# ----- the arithmetic -----------------------------------------------------------------------------


def test_measured_step_leaves_out_warm_up_window_and_far_outliers():
    times, t = [], 0
    for i in range(40):
        ns = 1_000_000 if i > 3 else 9_000_000
        if i == 30:
            ns = 500_000_000  # an evaluation inside one step
        times.append([i, t, t + ns])
        t += ns
    state = {"step_times": times, "window_first": 10, "recorded": list(range(10, 15)),
             "settled_at": 8, "activity": {}, "run_end_ns": t}
    m = measured_step(StepClock.from_state(state))
    assert 30 in m.outliers
    kept = set(m.steps)
    assert not kept & set(range(0, 9)) and not kept & set(range(9, 16))
    assert m.median_ns == 1_000_000 and m.count == len(kept)
