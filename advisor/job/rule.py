"""Rules over the whole job (all ranks at once), a separate kind from the per-rank rules.

A per-rank rule reads one op graph; a job rule reads the cross-rank `Job` model (aligned steps,
matched collectives, waiting, the straggler). They register in their own entry-point group,
``advisor.job_rules``, so a team's package can add job rules the way it adds per-rank ones, and
the per-rank registry and its contract stay untouched. Findings reuse the per-rank `Evidence`,
`Fix` and `Estimate` records, plus the ranks they concern.
"""

from __future__ import annotations

import statistics
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from importlib.metadata import entry_points
from typing import ClassVar

from advisor.config import ConfigError, RuleSettings
from advisor.engine.registry import PluginError
from advisor.engine.rule import CODE_RE, DOC_SECTIONS, NAME_RE, Confidence, Estimate, Evidence, Fix
from advisor.engine.runner import MIN_SPEEDUP
from advisor.job.model import Job, JobStep

GROUP = "advisor.job_rules"


@dataclass(frozen=True)
class JobFinding:
    rule: str
    code: str
    message: str
    ranks: tuple[int, ...]
    evidence: Evidence
    fix: Fix
    estimate: Estimate
    confidence: Confidence


class JobRule(ABC):
    """Base class of every job rule: class metadata, a documented docstring, ``check(job)``."""

    code: ClassVar[str]
    name: ClassVar[str]

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if getattr(cls, "__abstractmethods__", None):
            return
        if not CODE_RE.match(getattr(cls, "code", "")) or not NAME_RE.match(getattr(cls, "name", "")):
            raise TypeError(f"job rule {cls.__qualname__}: needs a code like 'DIST001' and a kebab-case name")
        doc = cls.__doc__ or ""
        missing = [s for s in DOC_SECTIONS if f"{s}\n" not in doc]
        if missing:
            raise TypeError(f"job rule {cls.__qualname__}: docstring lacks {', '.join(missing)}")

    @abstractmethod
    def check(self, job: Job) -> Iterable[JobFinding]:
        """Yield findings; estimates come from `job_estimate`."""


def load_job_rules() -> list[type[JobRule]]:
    rules = {}
    for ep in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        try:
            cls = ep.load()
        except Exception as e:
            raise PluginError(f"job rule plugin {ep.name!r} ({ep.value}) failed to load: {e}") from e
        if not (isinstance(cls, type) and issubclass(cls, JobRule)) or cls.name != ep.name:
            raise PluginError(f"job rule plugin {ep.name!r} ({ep.value}) is not a JobRule named {ep.name!r}")
        rules[cls.name] = cls
    return [rules[k] for k in sorted(rules)]


def split_settings(settings: RuleSettings) -> tuple[list[type[JobRule]], RuleSettings | None]:
    """``--select``/``--ignore`` name per-rank rules and job rules alike (by name or code), as
    one trace's analysis names its rules: the job rules picked, and the settings of the
    per-rank rules (None when the selection names job rules only, so no per-rank rule runs).
    Unknown names are the per-rank resolver's error; job rules take no options."""
    from advisor.config import resolve
    from advisor.engine.registry import load_rules

    rules = load_job_rules()
    by_key = {key: r for r in rules for key in (r.name, r.code)}
    for name in settings.options:
        if name in by_key:
            raise ConfigError(f"rule options: job rule {by_key[name].name} has no options")
    job_select = [n for n in settings.select if n in by_key]
    rank_select = tuple(n for n in settings.select if n not in by_key)
    ignored = {by_key[n].name for n in settings.ignore if n in by_key}
    rank = replace(settings, select=rank_select,
                   ignore=tuple(n for n in settings.ignore if n not in by_key))
    resolve(load_rules(), rank)  # unknown names and bad options fail here, before any work
    chosen = [by_key[n] for n in dict.fromkeys(job_select)] if settings.select else rules
    chosen = [r for r in chosen if r.name not in ignored]
    return chosen, (None if settings.select and not rank_select else rank)


def run_job_rules(job: Job, min_speedup: float = MIN_SPEEDUP,
                  rules: Sequence[type[JobRule]] | None = None) -> list[JobFinding]:
    found = [f for rule in (load_job_rules() if rules is None else rules) for f in rule().check(job)]
    return sorted((f for f in found if f.estimate.speedup >= min_speedup), key=lambda f: -f.estimate.speedup)


# ----- the job what-if ----------------------------------------------------------------------------

Saving = Callable[[int, JobStep], float]
"""(rank, step) -> ns per step the fix takes off that rank's own work (never its waiting)."""


def job_step_ns(job: Job, saving: Saving | None = None, floor_saving: Saving | None = None) -> float:
    """The job's step after a fix: per step, the slowest rank's own work (its step minus the time
    it waited for others) after the fix; the median over steps.

    A rank with a host floor (the host's own work, see `advisor.job.summary`) is held by its
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
    vals = []
    for st in job.steps:
        after = []
        for r, busy in st.rank_busy_ns.items():
            s = saving(r, st) if saving else 0.0
            floor = st.rank_floor_ns.get(r, 0)
            if not floor:
                after.append(max(0.0, busy - s))
                continue
            f = floor_saving(r, st) if floor_saving else 0.0
            gpu_own = busy - st.rank_idle_ns.get(r, 0)
            after.append(max(0.0, busy - max(s, f), floor - f, gpu_own - s))
        vals.append(max(after))
    return statistics.median(vals) if vals else 0.0


def job_estimate(job: Job, saving: Saving, low: Saving, high: Saving, model: str,
                 assumptions: Sequence[str],
                 floor: tuple[Saving, Saving, Saving] | None = None) -> Estimate:
    """Before/after for the job: the observed job step scaled by the model's ratio. ``floor``:
    what the fix takes off the ranks' host floors (mid, low, high), when it makes a host faster."""
    base_model = job_step_ns(job)
    observed = job.step_ns
    floors = floor or (None, None, None)

    def after(s: Saving, f: Saving | None) -> float:
        return observed * job_step_ns(job, s, f) / base_model if base_model else observed

    mid, lo, hi = after(saving, floors[0]), after(low, floors[1]), after(high, floors[2])
    speedup = observed / mid if mid > 0 else 1.0
    s_lo = observed / lo if lo > 0 else 1.0
    s_hi = observed / hi if hi > 0 else 1.0
    return Estimate(step_ns=observed, predicted_step_ns=mid, speedup=speedup,
                    low=min(s_lo, s_hi, speedup), high=max(s_lo, s_hi, speedup), model=model,
                    assumptions=tuple(assumptions))
