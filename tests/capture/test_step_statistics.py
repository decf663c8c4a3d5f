"""The step the user pays (issue 32): the settling rule, the measured mean step, burstiness and
the noisy-host check, on real step-time series: the public ImageNet example's own logs (its
per-iteration ``Time`` and ``Data`` columns, 7 and 15 DataLoader workers and none) and the step
clocks `advisor profile` wrote on the H100 (fixtures/archive/unprofiled), plus one real CPU run whose
host gets busy halfway."""

from __future__ import annotations

import gzip
import json
import re
import statistics

import pytest

from advisor.capture.baseline import NOISY_SLOWER, noisy_host
from advisor.capture.settle import (
    SETTLE_BLOCK,
    SETTLE_MAX_WAIT,
    prefetched_batches,
    settle_reason,
    settled,
)
from advisor.capture.steptimes import StepClock, measured_step
from advisor.engine.measured import BURSTY_RATIO
from tests.conftest import ROOT

LOGS = ROOT / "fixtures" / "archive" / "public" / "logs"
UNPROFILED = ROOT / "fixtures" / "archive" / "unprofiled"
ROW = re.compile(r"Time\s+([\d.]+) \(.*?Data\s+([\d.]+)")


def imagenet(name: str) -> tuple[list[float], list[float]]:
    """(step ns, data wait ns) per iteration, as the script's own log prints them."""
    times, waits = [], []
    with gzip.open(LOGS / f"{name}.log.gz", "rt") as f:
        for line in f:
            m = ROW.search(line)
            if m:
                times.append(float(m[1]) * 1e9)
                waits.append(float(m[2]) * 1e9)
    return times, waits


def opens_at(times: list[float], waits: list[float], workers: int) -> int:
    """The step count at which the session would prepare the window (or the forced start)."""
    for n in range(1, len(times)):
        if settle_reason(times[:n], waits[:n], workers * 2, n) or n >= SETTLE_MAX_WAIT:
            return n
    raise AssertionError("the series is shorter than the forced start")


def test_a_bursty_loader_is_not_recorded_while_it_eats_its_prefetched_batches():
    """7 workers: 15 iterations of 58 ms from the prefetch queue, then bursts of 300-600 ms.
    Block medians agreed at step 8 (the old rule); the window waits until the bursts are part
    of the steady state, so the recorded steps and the measured ones are the job's."""
    times, waits = imagenet("imagenet_j7_long")
    first_burst = next(i for i, t in enumerate(times[1:], 1) if t > 0.2e9)
    quick = times[1:2 * SETTLE_BLOCK + 1]
    assert statistics.median(quick[:SETTLE_BLOCK]) == pytest.approx(
        statistics.median(quick[SETTLE_BLOCK:]), rel=0.1)  # medians alone would open here
    n = opens_at(times, waits, workers=7)
    assert n > first_burst + SETTLE_BLOCK
    recent = times[n - SETTLE_BLOCK:n]
    assert max(recent) > 0.2e9  # the blocks it compared hold bursts
    why = settle_reason(times[:n], waits[:n], 14, n)
    assert "prefetched batches are consumed" in why and "data wait" in why


def test_more_workers_and_no_workers_settle_too():
    times, waits = imagenet("imagenet_j15_long")
    assert prefetched_batches({"num_workers": 15, "prefetch_factor": None}) == 30
    assert opens_at(times, waits, workers=15) > 30  # not before 30 prefetched batches are drawn
    times, waits = imagenet("imagenet_j0")
    n = opens_at(times, waits, workers=0)  # no workers: every batch is loaded in the step
    assert 2 * SETTLE_BLOCK <= n < SETTLE_MAX_WAIT
    assert prefetched_batches({"num_workers": 0}) == 0


def test_settling_waits_for_a_warm_up_trend_and_a_drifting_data_wait():
    """The ImageNet example without workers: its first iterations (2.4 s, then 0.8-1.0 s)
    are warm-up; the block means agree only once the loop runs at its pace (0.6-0.8 s)."""
    times, _ = imagenet("imagenet_j0")
    assert not settled(times[:2 * SETTLE_BLOCK])
    assert not settled(times[:2 * SETTLE_BLOCK - 1])  # too few steps to judge
    steady = [10.0, 10.2, 9.9, 10.1] * 4
    waits = [1.0] * SETTLE_BLOCK + [3.0] * SETTLE_BLOCK  # the wait grew by 20% of the step
    assert not settled([*steady], waits)
    assert not settled([*steady], [1.0] * 16, prefetched=20, consumed=16)
    assert SETTLE_MAX_WAIT > 2 * SETTLE_BLOCK


def test_the_measured_step_is_the_mean_and_a_bursty_loader_is_named_with_its_cause():
    """The ImageNet log after its prefetch (iterations 20-61): the mean is what the job pays,
    the median a quick step it rarely pays for; the slow steps waited for their batch."""
    times, waits = imagenet("imagenet_j7_long")
    t, rows, act = 0, [], {}
    for i, (ns, w) in enumerate(zip(times, waits, strict=True)):
        rows.append([i, t, t + int(ns)])
        act[i] = {"data": int(w)}
        t += int(ns)
    clock = StepClock.from_state({"step_times": rows, "activity": act, "settled_at": 19,
                                  "window_first": None, "run_end_ns": t})
    m = measured_step(clock)
    kept = [times[i] for i in m.steps]
    assert m.baseline_ns == m.mean_ns == pytest.approx(statistics.fmean(kept))
    assert m.bursty and m.mean_ns > BURSTY_RATIO * m.median_ns
    assert m.burst_cause.startswith("data waits:")
    assert any(line.startswith("bursty:") for line in m.describe())
    d = m.to_dict()
    assert d["baseline_ms"] == d["mean_ms"] and d["bursty"] and d["burst_cause"]


def test_a_steady_job_is_not_bursty():
    state = json.loads((UNPROFILED / "h100-2026-11-23d" / "run3" / "host-sync-kineto"
                        / "steps_rank0.json").read_text())["state"]
    m = measured_step(StepClock.from_state(state))
    assert not m.bursty and m.burst_cause == ""
    assert m.window.startswith(f"window: steps {state['window_first']}-")


@pytest.mark.parametrize("run", sorted(p.parent.relative_to(UNPROFILED).as_posix() for p in
                                       UNPROFILED.glob("**/steps_rank0.json")))
def test_the_h100_runs_are_quiet_enough_to_measure_on(run):
    """Every run `advisor profile` measured on the H100: the spread the data wait leaves is
    within the stated precision, and the unprofiled steps are not far slower than profiled."""
    state = json.loads((UNPROFILED / run / "steps_rank0.json").read_text())["state"]
    m = measured_step(StepClock.from_state(state))
    assert noisy_host(m, m.median_ns) is None
    assert noisy_host(m, m.median_ns / (NOISY_SLOWER + 0.1)) is not None  # the other sign


def test_a_busy_host_gets_a_warning_and_no_estimate_on_its_steps(tmp_path):
    """Real run: four threads of the job spin from iteration 10, after the window: the
    measured steps wait for the interpreter lock at random, the reports say the host was too
    noisy (their spread, or their slowness against the profiled steps: either sign, as the
    machine's scheduling decides), the baseline is not built on them, and no share in the HTML
    passes 100%."""
    from tests.capture.test_profile_cpu import SCRIPTS, advisor

    pytest.importorskip("torch", reason="advisor profile needs torch (the profile extra)")
    done = advisor("profile", "--wait", "3", "--steps", "4", "--then", "stop", "--out",
                   str(tmp_path), "--json", str(tmp_path / "r.json"), "--html",
                   str(tmp_path / "r.html"), str(SCRIPTS / "noisy_host.py"), "--iters", "50",
                   "--noise-from", "10")
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    m = report["steps"]["measured"]
    assert m["noisy_host"]
    assert report["baseline_step_ms"] != m["baseline_ms"]
    assert all(f["step_ms"] == report["baseline_step_ms"] for f in report["findings"]
               if f.get("relative_to", "step") == "step")
    assert any(w.startswith("host too noisy to measure on") for w in report["warnings"])
    assert "too noisy" in " ".join(done.stderr.split())
    html = (tmp_path / "r.html").read_text()
    assert "not used: the host was too noisy" in html
    shares = [float(x) for x in re.findall(r"(?<![+\-\d.])(\d+(?:\.\d+)?)%", html)]
    assert shares and max(shares) <= 100.0
