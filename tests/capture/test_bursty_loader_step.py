"""The step advisor reports for a bursty input pipeline is the mean step the script's own log
gives over the same steps (issue 32), on a real H100 run of pytorch/examples' ImageNet loop.

With 4 workers the loop runs about three 57 ms steps, then one of 400-700 ms that waits for its
batch. Those slow steps are the input pipeline's rhythm, paid on every burst, not checkpoints:
the mean step keeps them (`advisor.capture.steptimes._input_burst`). Kept as
fixtures/archive/public/loader-imagenet/bursty-j4-2026-11-25 (README there).
"""

from __future__ import annotations

import gzip
import json
import re
import statistics

from advisor.capture.steptimes import StepClock, measured_step
from tests.conftest import ROOT

RUN = ROOT / "fixtures" / "archive" / "public" / "loader-imagenet" / "bursty-j4-2026-11-25"
LINE = re.compile(r"Epoch: \[(\d+)\]\[\s*(\d+)/\s*(\d+)\]\s+Time\s+([\d.]+)")


def _log_ms() -> dict[int, float]:
    """Iteration -> its wall time (ms), as main.py printed it, numbered across epochs."""
    text = gzip.decompress((RUN / "prof_j4.log.gz").read_bytes()).decode()
    return {int(e) * int(n) + int(i): float(t) * 1e3 for e, i, n, t in LINE.findall(text)}


def test_the_reported_step_is_the_mean_the_log_gives_over_the_same_steps():
    clock = StepClock.from_state(json.loads((RUN / "steps_rank0.json").read_text())["state"])
    m = measured_step(clock)
    log = _log_ms()
    same = [log[i] for i in m.steps if i in log]
    assert len(same) >= 0.9 * len(m.steps)
    log_mean = statistics.fmean(same)
    assert abs(m.mean_ns / 1e6 - log_mean) / log_mean < 0.05, (m.mean_ns / 1e6, log_mean)
    # the slow steps are kept, and named as the input pipeline's bursts
    assert m.mean_ns > 2 * m.median_ns
    assert m.burst_cause.startswith("data waits")


def test_a_far_out_step_without_a_data_wait_is_still_left_out():
    """A checkpoint inside one step is not the loader's: the fence still takes it out."""
    state = json.loads((RUN / "steps_rank0.json").read_text())["state"]
    clock = StepClock.from_state(state)
    m = measured_step(clock)
    i, b, e = clock.times[-3]
    times = list(clock.times)
    times[-3] = (i, b, e + 20_000_000_000)  # 20 s more in that step, no data wait added
    act = {k: dict(v) for k, v in clock.activity.items()}
    act.setdefault(i, {})["data"] = 0
    changed = StepClock(tuple(times), clock.window, clock.settled_at, act)
    m2 = measured_step(changed)
    assert i in m2.outliers and i not in m.outliers
