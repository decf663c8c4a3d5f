"""The DataLoader as a pool of workers, from what `advisor profile` saw the run do (issue #34).

A trace shows that the training thread waited for its batch; it does not show how fast the
workers make batches, what starting them costs, or what more of them would do on this host.
The session's step clock does (`advisor.capture.session`: every step's time and data wait
outside the recorded window, every ``DataLoader.__iter__`` that started workers and what it
cost, the host's cores, the loader's settings). From those, for N workers now:

- **consume** ``C``: the training thread's own time per batch, the step less its data wait
  (mean over the steady steps: the steps outside the window and warm-up that started no
  loader, and not the one after a start, whose wait is the start's).
- **supply** ``S``: the steady steps' mean time per batch. A pool of N workers, each taking
  ``W`` to make a batch, supplies one every ``W / N``; while the training thread waits
  (``S > C``) the pool is the bottleneck and ``W = N * S``. Without waits ``N * S`` only
  bounds ``W`` from above (the pool could be faster), which errs towards fewer workers.
- **restarts** ``R``: per step of the run, what the iterators started after the first cost:
  the ``__iter__`` time (forking N workers, one after the other: scales with N) and the
  first batch's wait beyond the typical one (a fresh worker loads its first batch at its own
  speed: the same for any N the host has cores for, longer once workers share cores). The
  run's own epochs set how often that is paid: a short epoch pays it often.
- **cores** ``K``: the CPUs the process may use; the main process keeps `MAIN_CORES` (the
  training thread, and the pin-memory thread with ``pin_memory``), the rest ``F`` run
  workers. N' workers make batches at ``min(N', F) / W`` (more than ``F`` share cores).

The step with N' workers is ``max(C, W / min(N', F)) + R'``, ``R'`` the restart cost at N'
(none once the workers are persistent: the run's first start is paid once). More workers make
the run slower when ``R`` grows by more than the supply gains: a short epoch and a loader that
keeps up, or a host without cores to spare.

Nothing here is fitted to a measurement; docs/validation.md ("The loader model") compares it
with runs of pytorch/examples' ImageNet script at other worker counts.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MIN_STEADY_STEPS = 4
"""Fewer steady steps than this measure no rate."""
WAIT_SHARE = 0.05
"""The steady steps wait for their batch (the pool is the bottleneck) when the mean data wait
is at least this share of the step: under it, waits are run-to-run noise."""
MAIN_CORES = 1
"""Cores the training thread keeps (it launches the GPU work and spins in its syncs)."""
PIN_THREAD_CORES = 1
"""The pin-memory thread (``pin_memory=True`` with workers) copies every batch into page-locked
memory in the main process: counted as a core the workers do not get."""
MAX_WORKERS = 32
"""More DataLoader workers than this rarely help one GPU (each holds a dataset copy and its
prefetched batches)."""
NEAR_BEST = 1.01
"""The proposal is the fewest workers within 1% of the best predicted step (fewer processes,
less memory, for no measurable loss)."""


@dataclass(frozen=True)
class LoaderRun:
    """What the run showed of its loader (all times in ns, per step unless named)."""

    workers: int
    cores: int
    pin_memory: bool
    persistent: bool
    steady_steps: int
    supply_ns: float  # S: the steady steps' mean time per batch
    wait_ns: float  # their mean data wait
    consume_ns: float  # C: the step less its wait
    restart_start_ns: float  # the iterators' start (__iter__, forks) after the first, per step
    restart_wait_ns: float  # their first batches' excess wait, per step
    starts: int  # iterators that started workers (the first included)
    epoch_steps: float | None  # steps between two starts (None: one start seen)

    @property
    def free_cores(self) -> int:
        """Cores left to the workers after the main process's."""
        keep = MAIN_CORES + (PIN_THREAD_CORES if self.pin_memory and self.workers else 0)
        return max(1, self.cores - keep)

    @property
    def waits(self) -> bool:
        """Whether the steady steps wait for their batch: the pool is the bottleneck."""
        return self.wait_ns >= WAIT_SHARE * self.supply_ns

    @property
    def worker_batch_ns(self) -> float:
        """W: one worker's time to make a batch on a core of its own. N workers on as many
        cores supply one batch every ``W / N``, more than the free cores every ``W / F``; with
        no workers, the training thread's own wait is the loading."""
        if not self.workers:
            return self.wait_ns
        return min(self.workers, self.free_cores) * self.supply_ns

    @property
    def restart_ns(self) -> float:
        return self.restart_start_ns + self.restart_wait_ns

    @property
    def step_ns(self) -> float:
        """The step as the run paid it: the steady step and its share of the restarts."""
        return self.supply_ns + self.restart_ns


@dataclass(frozen=True)
class Prediction:
    workers: int
    parallel: float  # workers making batches at once (bounded by the free cores)
    supply_ns: float  # the steady step
    restart_ns: float  # the restarts' share per step
    step_ns: float

    def speedup_over(self, run: LoaderRun) -> float:
        return run.step_ns / self.step_ns if self.step_ns > 0 else 1.0


def predict(run: LoaderRun, workers: int, free_cores: float | None = None,
            persistent: bool | None = None) -> Prediction:
    """The step with ``workers`` DataLoader workers. ``free_cores``: the cores they may use
    (default: the run's; the pessimistic bound passes half, for hyperthread siblings);
    ``persistent``: True for the step once the workers stay alive between epochs (default:
    the starts the run paid, scaled to ``workers``)."""
    free = run.free_cores if free_cores is None else max(1.0, free_cores)
    parallel = float(min(workers, free))
    supply = max(run.consume_ns, run.worker_batch_ns / parallel) if parallel > 0 else run.supply_ns
    if persistent and not run.persistent:
        restart = 0.0  # the fix keeps them: the run's first start is all that is left
    elif not run.workers:
        restart = run.restart_ns
    else:
        # forks one after the other; the first batch after W at the share of a core each
        # worker gets (all N start loading at once)
        share_now = max(1.0, run.workers / free)
        share = max(1.0, workers / free)
        restart = (run.restart_start_ns * workers / run.workers
                   + run.restart_wait_ns * share / share_now)
    return Prediction(workers, parallel, supply, restart, supply + restart)


@dataclass(frozen=True)
class Proposal:
    """The worker count the model proposes, and what it expects of it and of more."""

    best: Prediction
    low: Prediction  # the same count with half the free cores (hyperthread siblings)
    most: Prediction  # every free core a worker: what the naive fix would do
    restarts_share: float  # the restarts' share of the step now

    def more_is_slower(self, run: LoaderRun) -> bool:
        """Whether a worker on every free core would make the step slower than it is now."""
        return self.most.workers > run.workers and self.most.step_ns > run.step_ns


def propose(run: LoaderRun) -> Proposal:
    """The fewest workers within `NEAR_BEST` of the best predicted step over 1..free cores."""
    top = max(1, min(run.free_cores, MAX_WORKERS))
    preds = [predict(run, n) for n in range(1, top + 1)]
    floor = min(p.step_ns for p in preds)
    best = next(p for p in preds if p.step_ns <= floor * NEAR_BEST)
    low = predict(run, best.workers, free_cores=run.free_cores / 2)
    return Proposal(best, low, preds[-1], run.restart_ns / run.step_ns if run.step_ns else 0.0)


def _steps(state: Mapping[str, Any]) -> list[tuple[int, int]]:
    return [(int(i), int(e) - int(b)) for i, b, e in state.get("step_times") or ()]


def observe(state: Mapping[str, Any]) -> LoaderRun | None:
    """The loader as the session's state saw it (None without a loader, its cores or enough
    steady steps)."""
    loader = state.get("loader") or None
    cores = state.get("host_cores")
    times = _steps(state)
    if not loader or not cores or not times:
        return None
    # int keys in the live session, str keys once written as JSON
    act = {int(k): v for k, v in (state.get("activity") or {}).items()}
    recorded = {int(i) for i in state.get("recorded") or ()}
    near = {i + d for i in recorded for d in (-1, 0, 1)}  # the window's start and stop work
    settled = state.get("settled_at")
    starts = sorted(int(k) for k, a in act.items() if a.get("loader_start_calls"))
    after_start = set(starts) | {i + 1 for i in starts}
    steady = [(ns, int(act.get(i, {}).get("data", 0))) for i, ns in times
              if i not in near and i not in after_start and (settled is None or i > settled)]
    if len(steady) < MIN_STEADY_STEPS:
        return None
    supply = statistics.fmean(ns for ns, _ in steady)
    if supply <= 0:  # steps that took no time measure no rate
        return None
    wait = statistics.fmean(d for _, d in steady)
    typical_wait = float(statistics.median(d for _, d in steady))
    start_ns = wait_ns = 0.0
    calls_seen = 0
    for k in starts:
        a = act[k]
        calls = int(a["loader_start_calls"])
        first = 1 if calls_seen == 0 else 0  # the run's first start is paid once, always
        calls_seen += calls
        if calls - first <= 0:
            continue
        share = (calls - first) / calls
        # the first batch's wait falls in the start's step or the one after it
        excess = sum(max(0.0, b.get("data", 0) - b.get("data_batches", 0) * typical_wait)
                     for b in (a, act.get(k + 1, {})) if k + 1 not in starts or b is a)
        start_ns += share * a.get("loader_start", 0)
        wait_ns += share * excess
    n = len(times)
    gaps = [b - a for a, b in itertools.pairwise(starts) if b > a]
    return LoaderRun(
        workers=int(loader.get("num_workers", 0)), cores=int(cores),
        pin_memory=bool(loader.get("pin_memory")),
        persistent=bool(loader.get("persistent_workers")),
        steady_steps=len(steady), supply_ns=supply, wait_ns=wait,
        consume_ns=statistics.fmean(max(0, ns - d) for ns, d in steady),
        restart_start_ns=start_ns / n, restart_wait_ns=wait_ns / n,
        starts=calls_seen, epoch_steps=float(statistics.median(gaps)) if gaps else None)
