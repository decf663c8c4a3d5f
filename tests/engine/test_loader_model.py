"""The loader model from the run's measured rates (issue 34) and the mechanism it lets the rule
name (issue 33), on real runs of pytorch/examples' ImageNet script (ResNet-18, batch 256,
2 epochs of 61 iterations, 4 DataLoader workers restarted every epoch, 16 CPUs):

- fixtures/archive/public/loader-imagenet/bursty-j4-2026-11-25: H100 host; `advisor profile` of ``-j 4``
  (its state and trace) and the script alone with ``-j 4`` and ``-j 15`` (their logs);
- fixtures/archive/public/loader-imagenet/bursty-j4-h200-2026-11-25: the same on an H200 host, whose
  profiled run stopped after its window (no restart seen).

The model was derived from the mechanism (a pool of workers, their start-up, the host's cores),
not fitted to these runs: the estimates are compared with the logs on the gain, the share of the
step saved (`tests.validation_data.saving`), within the 30% every rule is held to.
"""

from __future__ import annotations

import gzip
import json
import re
import statistics
from functools import cache
from pathlib import Path

import pytest

from advisor.analysis import analyze_graph
from advisor.capture.steptimes import StepClock, measured_step
from advisor.engine.effects import BatchSupply
from advisor.engine.host import HostFacts
from advisor.engine.loader_model import LoaderRun, observe, predict, propose
from advisor.ingest.base import load_trace
from tests import validation_data as vd
from tests.archive import archived
from tests.conftest import ROOT

H100 = archived("public/loader-imagenet/bursty-j4-2026-11-25")  # unpacked (tests.archive)
H200 = archived("public/loader-imagenet/bursty-j4-h200-2026-11-25")
LINE = re.compile(r"Epoch: \[(\d+)\]\[\s*(\d+)/\s*(\d+)\]\s+Time\s+([\d.]+)")
MEASURED_WORKERS = 15  # the by-hand run: -j 15 (16 cores)


def _state(run: Path) -> dict:
    if (run / "steps_rank0.json").exists():
        return json.loads((run / "steps_rank0.json").read_text())["state"]
    return json.loads((run / "capture_rank0.json").read_text())


def _log_ms(path: Path) -> dict[int, float]:
    """Iteration -> its wall time (ms) as main.py printed it, numbered across epochs."""
    text = gzip.decompress(path.read_bytes()).decode()
    return {int(e) * int(n) + int(i): float(t) * 1e3 for e, i, n, t in LINE.findall(text)}


def _measured(run: Path) -> tuple[float, float]:
    """-j 4 and -j 15 (ms), each from the script's own log, over the steps advisor measured in
    the profiled run (the report's baseline: the settled steps outside the window)."""
    steps = measured_step(StepClock.from_state(_state(run))).steps
    j4, j15 = _log_ms(run / "plain_j4.log.gz"), _log_ms(run / "plain_j15.log.gz")
    same = [i for i in steps if i in j4 and i in j15]
    assert len(same) >= 0.9 * len(steps)
    return statistics.fmean(j4[i] for i in same), statistics.fmean(j15[i] for i in same)


@cache
def _run(run: Path) -> LoaderRun:
    found = observe(_state(run))
    assert found is not None
    return found


def test_the_run_is_read_as_the_script_ran_it():
    run = _run(H100)
    assert (run.workers, run.cores, run.persistent, run.pin_memory) == (4, 16, False, True)
    assert run.epoch_steps == 61  # main.py's epochs: 61 iterations
    assert run.waits  # the steady steps wait for their batch: the pool is the bottleneck
    # the steady supply is the mean step of the script's own log over the same steps (the
    # restarts' steps aside), and the step itself is what the log shows without a wait
    log = _log_ms(H100 / "prof_j4.log.gz")
    clock = StepClock.from_state(_state(H100))
    quick = [log[i] for i in measured_step(clock).steps if i in log and log[i] < 80]
    assert run.consume_ns / 1e6 == pytest.approx(statistics.median(quick), rel=0.10)
    # each worker takes 4 steps' time for a batch: 4 workers, one batch a step
    assert run.worker_batch_ns == pytest.approx(4 * run.supply_ns)


@pytest.mark.parametrize("run", [H100, H200], ids=["h100", "h200"])
def test_fifteen_workers_estimated_within_the_bound_of_the_measured_gain(run):
    """Estimated 2.09x (H100 host) and 2.64x (H200 host) against 1.86x and 3.16x measured over
    the same steps: the saving +13% and -9% off, the gain (speedup - 1) +26% and -24%. On the
    H200 host the plain -j 4 run's bursts fell worse on those 20 steps than in the profiled
    run (185 against 138 ms). The -j 15 step itself lies between the step's own time (every
    batch ready) and the pessimistic prediction (half the free cores, for hyperthread
    siblings): 58.3 < 83.8 < 104.6 ms and 52.4 < 58.6 < 78.9 ms."""
    lr = _run(run)
    j4_ms, j15_ms = _measured(run)
    measured = j4_ms / j15_ms
    est = predict(lr, MEASURED_WORKERS).speedup_over(lr)
    error = (vd.saving(est) - vd.saving(measured)) / vd.saving(measured)
    assert abs(error) <= vd.GAIN_TOLERANCE, (est, measured, error)
    assert abs((est - 1) / (measured - 1) - 1) <= vd.GAIN_TOLERANCE, (est, measured)
    low = predict(lr, MEASURED_WORKERS, free_cores=lr.free_cores / 2)
    assert lr.consume_ns / 1e6 <= j15_ms <= low.step_ns / 1e6, (lr.consume_ns, j15_ms, low)


def _epoch_start_excess(log: dict[int, float]) -> float:
    """What the second epoch's start cost in the log: its first 3 iterations over 3 typical
    ones (the first batch waits for the fresh workers; the next ones for their first round)."""
    second = [log[i] for i in sorted(log) if 61 <= i < 122]
    return sum(second[:3]) - 3 * statistics.median(second)


def test_more_workers_cost_more_at_every_epoch_start():
    """The part of the step that grows with the workers: measured in both logs and predicted
    in the same direction, from the run with 4 workers alone."""
    run = _run(H100)
    j4 = _epoch_start_excess(_log_ms(H100 / "plain_j4.log.gz"))
    j15 = _epoch_start_excess(_log_ms(H100 / "plain_j15.log.gz"))
    assert j15 > j4 > 0
    now, more = predict(run, 4), predict(run, MEASURED_WORKERS)
    assert more.restart_ns > now.restart_ns > 0
    # the model's restart cost per epoch at 4 workers is the log's, within 25%
    assert run.restart_ns * run.epoch_steps / 1e6 == pytest.approx(j4, rel=0.25)


def test_the_proposal_stops_where_the_step_no_longer_waits():
    """With non-persistent workers each one costs a fork per epoch: the proposal is the fewest
    workers whose supply keeps up with the step, not every core."""
    run = _run(H100)
    prop = propose(run)
    assert 4 < prop.best.workers < run.free_cores
    assert prop.best.supply_ns == pytest.approx(run.consume_ns)  # the step no longer waits
    assert predict(run, prop.best.workers - 1).supply_ns > run.consume_ns
    assert prop.most.step_ns > prop.best.step_ns  # forks of workers that are not needed
    # persistent workers take the restarts off: the step is then the pool's supply alone
    kept = predict(run, prop.best.workers, persistent=True)
    assert kept.restart_ns == 0 and kept.step_ns < prop.best.step_ns


def test_a_run_without_restarts_or_waits_predicts_no_gain_from_workers():
    """The H200 profiled run stopped after its window: one loader start, no restart to
    scale; the model then says nothing of restarts and keeps the steady supply."""
    run = _run(H200)
    assert run.starts == 1 and run.restart_ns == 0 and run.epoch_steps is None
    assert predict(run, run.workers).step_ns == pytest.approx(run.step_ns)


@pytest.fixture(scope="module")
def j4_findings():
    """The H100 run's trace analysed with its session state, as `advisor profile` does."""
    graph = load_trace(H100 / "trace_rank0.json.gz")  # the archive's xz, unpacked
    return analyze_graph(graph, facts=HostFacts.from_state(_state(H100))).results.findings


def test_the_j4_loader_finding_names_the_worker_deficit_not_allocation_churn(j4_findings):
    """Issue 33: slow steps that wait for their batch, with no allocation call in them, are the
    worker pool's bursts. The fix raises the workers the model proposes, persistent first."""
    found = next(f for f in j4_findings if f.rule == "loader-jitter")
    assert found.fix.mechanism == "saturated-workers"
    assert "Preallocate" not in found.fix.title
    best = propose(_run(H100)).best.workers
    assert f"raise num_workers from 4 to {best}" in found.fix.title
    assert found.fix.title.index("persistent_workers=True") < found.fix.title.index("raise")
    assert found.fix.knobs == (f"loader:num_workers={best}",)  # what `--try` would time
    assert "restart every 61 steps" in found.message
    prop, run = propose(_run(H100)), _run(H100)
    assert found.estimate.speedup == pytest.approx(prop.best.speedup_over(run), rel=1e-6)
    # the loader's floor for every combination: a batch per W / P and the restarts per step
    supply = next(e for e in found.effects if isinstance(e, BatchSupply))
    assert supply.floor_ns == pytest.approx(
        run.worker_batch_ns / prop.best.parallel + prop.best.restart_ns)


def test_allocation_calls_in_the_slow_steps_still_name_allocation_churn():
    """The loader-jitter scenario's bad trace: cudaMalloc/cudaFree/cudaHostAlloc in the step
    as well as input waits; its allocation evidence keeps the preallocation fix."""
    graph = load_trace(ROOT / "fixtures" / "scenarios" / "loader-jitter" / "bad" / "trace.json.gz")
    found = next(f for f in analyze_graph(graph).results.findings if f.rule == "loader-jitter")
    assert found.fix.mechanism == "allocation-churn"
    assert found.evidence.api_calls


def test_the_live_session_state_reads_the_same_as_its_json():
    """`advisor profile` analyses from the live session, whose activity is keyed by int step
    numbers; the files hold them as strings."""
    state = _state(H100)
    live = {**state, "activity": {int(k): v for k, v in state["activity"].items()}}
    assert observe(live) == _run(H100)
