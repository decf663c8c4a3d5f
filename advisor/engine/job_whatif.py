"""The job what-if: the job's step after a fix, and the job scope's estimate API.

A job rule's `check(job, ctx)` makes its findings with ``ctx.finding(...)``, the entry point a
rank rule uses (`advisor.engine.estimates.EstimateAPI`); its effects are `JobEffect`s, what the
fix takes off each rank's own work per step, and `JobContext.what_if` turns them into the
estimate with `job_estimate` (the slowest rank's own work after the fix, per aligned step).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from string import Template

from advisor.engine.estimates import EstimateAPI
from advisor.engine.fix_variants import unknown_framework_fix
from advisor.engine.floors import Floor
from advisor.engine.job_model import Job, JobStep
from advisor.engine.rule import Estimate, Evidence, Fix

Saving = Callable[[int, JobStep], float]
"""(rank, step) -> ns per step the fix takes off that rank's own work (never its waiting)."""


def job_step_ns(job: Job, saving: Saving | None = None, floor_saving: Saving | None = None) -> float:
    """The job's step after a fix: per step, the slowest rank's own work (its step minus the time
    it waited for others) after the fix; the median over steps.

    A rank with a host floor (the host's own work, see `advisor.engine.rank_summary`) is held by its
    host and its GPU: after the fix it takes the longest of its own work less what the fix saves
    (``saving`` on the GPU side, ``floor_saving`` on the host, whichever is more: the two are
    parallel resources and the step shrinks by the one that held it), its host floor less the
    host saving (a fix of the GPU side does not make a host faster), and its GPU's own work
    (compute and transfers, without the idle time) less the GPU saving.

    Why the floor: on the H200 2-GPU DDP validation (docs/multigpu.md) a host-bound rank's GPU
    spun 34 ms of a 44 ms step in all-reduce waiting for its peer while its host worked 32 ms;
    counting its own work as 10 ms put a straggler fix at 4.5x where 1.37x was measured. Why the
    host saving shortens the own work too: on the same runs the no_sync fix took 17 ms of host
    time a step off a host-bound rank whose GPU idled 37-90 ms of it, and the estimate stayed at
    1.03x while only the GPU-side saving could lower its own work (1.09x now from torch.profiler
    against 1.15x measured; from nsys, which shows little of that host work, 1.03x).

    Known bias: the floor leaves out the time the host's calls were held by the device, part of
    which stays after a fix (syncs that were not waiting on a peer), so a fix that makes a rank
    host-bound over-promises by up to that held time (3.4 ms of a 222 ms step on the planted
    straggler of `tests/job/test_job_model.py`)."""
    return _job_after(job, saving, floor_saving)[0]


def _job_after(job: Job, saving: Saving | None = None,
               floor_saving: Saving | None = None) -> tuple[float, float, bool]:
    """`job_step_ns`, with the slowest rank's host floor after the fix (median over steps) and
    whether that floor held the step (on most steps the slowest rank's step after the fix is its
    host floor, above what the fix left of its own work)."""
    vals, floors, held = [], [], 0
    for st in job.steps:
        after: list[tuple[float, float, bool]] = []  # (step after, host floor after, floor binds)
        for r, busy in st.rank_busy_ns.items():
            s = saving(r, st) if saving else 0.0
            floor = st.rank_floor_ns.get(r, 0)
            if not floor:
                after.append((max(0.0, busy - s), 0.0, False))
                continue
            f = floor_saving(r, st) if floor_saving else 0.0
            gpu_own = busy - st.rank_idle_ns.get(r, 0)
            rest = max(0.0, busy - max(s, f), gpu_own - s)
            after.append((max(rest, floor - f), floor - f, floor - f > rest))
        step, floor_after, binds = max(after)
        vals.append(step)
        floors.append(floor_after)
        held += binds
    if not vals:
        return 0.0, 0.0, False
    return statistics.median(vals), statistics.median(floors), held > len(vals) / 2


def job_estimate(job: Job, saving: Saving, low: Saving, high: Saving, model: str,
                 assumptions: Sequence[str],
                 floor: tuple[Saving | None, Saving | None, Saving | None] | None = None) -> Estimate:
    """Before/after for the job: the observed job step scaled by the model's ratio. ``floor``:
    what the fix takes off the ranks' host floors (mid, low, high), when it makes a host faster."""
    base_model = job_step_ns(job)
    observed = job.step_ns
    floors = floor or (None, None, None)
    scale = observed / base_model if base_model else 1.0

    def after(s: Saving, f: Saving | None) -> float:
        return observed * job_step_ns(job, s, f) / base_model if base_model else observed

    mid_ns, host_ns, binds = _job_after(job, saving, floors[0])
    mid = mid_ns * scale if base_model else observed
    lo, hi = after(low, floors[1]), after(high, floors[2])
    speedup = observed / mid if mid > 0 else 1.0
    s_lo = observed / lo if lo > 0 else 1.0
    s_hi = observed / hi if hi > 0 else 1.0
    held = Floor("host", host_ns * scale, HOST_FLOOR) if host_ns else None
    return Estimate(step_ns=observed, predicted_step_ns=mid, speedup=speedup,
                    low=min(s_lo, s_hi, speedup), high=max(s_lo, s_hi, speedup), model=model,
                    assumptions=tuple(assumptions), floor=held, floor_binds=binds)


HOST_FLOOR = ("the host's own work of the rank slowest after the fix (its step less the time "
              "its calls waited for the GPU)")


@dataclass(frozen=True)
class JobEffect:
    """What a fix takes off each rank per aligned step: ``gpu`` its own GPU-side work, ``host``
    its host floor (None: the fix leaves the hosts as they are). A rule passes one per variant
    (``effects``, ``low_effects``, ``high_effects``); several in one variant add up."""

    gpu: Saving
    host: Saving | None = None


def _total(effects: Sequence[JobEffect], host: bool) -> Saving | None:
    """One saving for several effects: the one effect's own callable, so one effect's estimate
    is computed exactly as `job_estimate` computes it; None: no effect saves there."""
    parts = [e.host if host else e.gpu for e in effects]
    parts = [p for p in parts if p is not None]
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    return lambda r, st: sum(p(r, st) for p in parts)


@dataclass
class JobContext(EstimateAPI):
    """What a job rule's `check` gets besides the job: its options and the estimate API, whose
    model is the job what-if (`job_estimate`)."""

    job: Job
    options: Mapping[str, Mapping[str, object]] | None = None

    keeps_effects = False  # job findings are not combined: the effects are (rank, step) callables

    def option(self, rule: str, key: str, default: object) -> object:
        return (self.options or {}).get(rule, {}).get(key, default)

    def evidence(self, quantities: Mapping[str, float]) -> Evidence:
        """A job finding's evidence: the aligned steps it rests on and what the rule measured."""
        return Evidence(steps=tuple(s.index for s in self.job.steps), quantities=dict(quantities))

    def fix(self, rule: type, mechanism: str, params: Mapping[str, object] | None = None,
            requires: tuple[str, ...] = ()) -> Fix:
        """The rule's declared fix for ``mechanism``: the job does not say which framework runs
        the loop, so a mechanism with knobs of several frameworks gives them side by side
        (`advisor.engine.fix_variants`), as a bare nsys capture does."""
        values = {k: str(v) for k, v in (params or {}).items()}
        frameworks = {v.framework for v in rule.fixes if v.mechanism == mechanism}
        if frameworks == {"pytorch"}:
            v = rule.fix_for(mechanism, "pytorch")
            return Fix(Template(v.title).substitute(values), Template(v.snippet).substitute(values),
                       kind=v.kind, requires=requires, mechanism=mechanism)
        return unknown_framework_fix(rule, mechanism, values, requires, "unknown")

    def what_if(self, effects: Sequence[JobEffect], low_effects: Sequence[JobEffect] | None,
                high_effects: Sequence[JobEffect] | None, basis: str, model: str,
                assumptions: Sequence[str]) -> Estimate:
        """`job_estimate` of the effects; the job's step is always its median (``basis``)."""
        low = effects if low_effects is None else low_effects
        high = effects if high_effects is None else high_effects
        gpu = [_total(v, False) or _none for v in (effects, low, high)]
        host = tuple(_total(v, True) for v in (effects, low, high))
        floor = None if all(h is None for h in host) else host
        return job_estimate(self.job, gpu[0], gpu[1], gpu[2], model, assumptions, floor=floor)


def _none(_rank: int, _step: JobStep) -> float:
    return 0.0
