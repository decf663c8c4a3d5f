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

The restarts' cost to the whole run, and what ``persistent_workers=True`` saves of it, is
`RestartCost` (`restart_cost`, read by `advisor.capture.accounting` for the run-relative
``loader-restarts`` finding): the epoch start's steps over the settled mean until the prefetch
queue is refilled, against the settled loop's time per step, apart from the step-level model
above.

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
    prefetch: int = 2  # batches each worker loads ahead (DataLoader's prefetch_factor)

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
        starts=calls_seen, epoch_steps=float(statistics.median(gaps)) if gaps else None,
        prefetch=int(loader.get("prefetch_factor") or 2))


@dataclass(frozen=True)
class RestartCost:
    """What restarting the DataLoader's workers at every epoch cost the run, and what
    ``persistent_workers=True`` takes off it: an epoch-level fix, estimated against the whole
    run's time per step, never against the settled step (issue 34 item 3).

    A restart costs the forks (``__iter__``: one worker after the other) and the steps after it
    until the fresh workers have refilled the prefetch queue: their first batches (each fresh
    worker starts, imports what it loads with, takes its share of the cores from the training
    thread) and the steps that wait for them. Persistent workers keep the forks and the start-up;
    they still make the epoch's first round of batches after the new sampler order is known, one
    batch per worker, which the steps of that round no longer hide: at most N x C (N workers, C
    the step's own time) per restarted iterator, the part that stays."""

    restarts: int  # iterators started after the run's first
    total_ns: float  # the epoch starts' measured cost, all restarts together
    fork_ns: float  # of which the forks (__iter__): what persistent workers surely save
    fill_ns: float  # what persistent workers still pay: the first round from warm workers
    steps: int  # the run's steps (the restarts' frequency: epochs x cost over steps)
    loop_step_ns: float  # the settled loop's wall time per step, epoch starts included
    per_start: tuple[tuple[int, float], ...] = ()  # (step, its restarts' cost) for each

    @property
    def saved_ns(self) -> float:
        """The estimate: the measured cost less the warm first round, never below the forks."""
        return max(self.fork_ns, self.total_ns - self.fill_ns)

    def speedup(self, saved_ns: float | None = None) -> float:
        """The whole run's time per step over the same with ``saved_ns`` (default: `saved_ns`)
        taken off at the run's own rate of restarts."""
        saved = self.saved_ns if saved_ns is None else saved_ns
        per = self.loop_step_ns
        after = per - saved / max(1, self.steps)
        return per / after if per > 0 and after > 0 else 1.0


def _window(k: int, starts: list[int], depth: int, epoch: int | None) -> range:
    """The start step and the refill after it: at most half the epoch, so that each epoch keeps
    settled steps to compare with (an epoch shorter than the prefetch queue's refill is nearly
    all start, and its second half is the nearest to a settled step it has)."""
    later = [s for s in starts if s > k]
    span = (later[0] - k) if later else epoch
    if span:
        depth = min(depth, max(1, span // 2))
    return range(k, k + 1 + depth)


def restart_cost(times: list[tuple[int, int]], activity: Mapping[int, Mapping[str, int]],
                 settled: set[int], data_typical: float,
                 run: LoaderRun | None = None) -> RestartCost:
    """The epoch starts' cost from the step clock: ``times`` (index, ns) of the run's steps,
    ``activity`` what the host was timed doing in each, ``settled`` the steps whose time is the
    loop's own (after warm-up, outside the profiler's window), ``run`` the loader as
    `observe` read it (its workers, prefetch and the step's own time; None: not measured).

    Each restart's cost is the signed sum of the start step's and the refill's excess over
    the settled steps' mean outside every start (evaluation and checkpoint time left out: they
    are other findings'), so that a bursty loader's usual waits, in that mean, are not counted
    twice; at least the forks. A start outside the settled steps (warm-up, the window) counts
    its forks and its step's data wait over the typical one."""
    step_ns = dict(times)
    starts = sorted(k for k, a in activity.items() if a.get("loader_start_calls"))
    workers = run.workers if run is not None and run.workers else 0
    depth = run.prefetch * workers if workers else 1
    own = lambda j: step_ns[j] - activity.get(j, {}).get("eval", 0) - activity.get(  # noqa: E731
        j, {}).get("checkpoint", 0)
    gaps = [b - a for a, b in itertools.pairwise(starts) if b > a]
    epoch = int(statistics.median(gaps)) if gaps else None
    windows = {k: _window(k, starts, depth, epoch) for k in starts}
    inside = {j for w in windows.values() for j in w}
    base_steps = [own(j) for j in sorted(settled) if j in step_ns and j not in inside]
    base = statistics.fmean(base_steps) if base_steps else None
    loop = [step_ns[j] for j in settled if j in step_ns]
    # captures since wave 5 say which starts restart a loader (`loader_restart_calls`); older
    # ones only that the run's first start is paid once
    per_loader = any("loader_restart_calls" in activity[k] for k in starts)
    restarts, total, fork, fill = 0, 0.0, 0.0, 0.0
    seen = 0
    each: list[tuple[int, float]] = []
    for k in starts:
        a = activity[k]
        calls = int(a["loader_start_calls"])
        first = 1 if seen == 0 else 0  # the run's first start is paid once, persistent or not
        seen += calls
        again = int(a.get("loader_restart_calls", 0)) if per_loader else calls - first
        if again <= 0:
            continue
        share = again / calls
        f = share * a.get("loader_start", 0)
        w = [j for j in windows[k] if j in step_ns]
        if base is not None and k >= 0 and w and all(j in settled for j in w):
            cost = max(f, share * sum(own(j) - base for j in w))
        else:
            cost = f + share * max(0.0, a.get("data", 0) - data_typical) if k >= 0 else f
        restarts += again
        total += cost
        each.append((k, cost))
        fork += f
        if run is not None and workers:
            fill += min(max(0.0, cost - f), again * workers * run.consume_ns)
    return RestartCost(restarts, total, fork, fill, len(times),
                       statistics.fmean(loop) if loop else 0.0, tuple(each))
