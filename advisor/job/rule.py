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
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import ClassVar

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


def run_job_rules(job: Job, min_speedup: float = MIN_SPEEDUP) -> list[JobFinding]:
    found = [f for rule in load_job_rules() for f in rule().check(job)]
    return sorted((f for f in found if f.estimate.speedup >= min_speedup), key=lambda f: -f.estimate.speedup)


# ----- the job what-if ----------------------------------------------------------------------------

Saving = Callable[[int, JobStep], float]
"""(rank, step) -> ns per step the fix takes off that rank's own work (never its waiting)."""


def job_step_ns(job: Job, saving: Saving | None = None) -> float:
    """The job's step after a fix: per step, the slowest rank's own work (its step minus the time
    it waited for others) after the saving; the median over steps."""
    vals = []
    for st in job.steps:
        vals.append(max(max(0.0, st.rank_busy_ns[r] - (saving(r, st) if saving else 0.0))
                        for r in st.rank_busy_ns))
    return statistics.median(vals) if vals else 0.0


def job_estimate(job: Job, saving: Saving, low: Saving, high: Saving, model: str,
                 assumptions: Sequence[str]) -> Estimate:
    """Before/after for the job: the observed job step scaled by the model's ratio."""
    base_model = job_step_ns(job)
    observed = job.step_ns

    def after(s: Saving) -> float:
        return observed * job_step_ns(job, s) / base_model if base_model else observed

    mid, lo, hi = after(saving), after(low), after(high)
    speedup = observed / mid if mid > 0 else 1.0
    s_lo = observed / lo if lo > 0 else 1.0
    s_hi = observed / hi if hi > 0 else 1.0
    return Estimate(step_ns=observed, predicted_step_ns=mid, speedup=speedup,
                    low=min(s_lo, s_hi, speedup), high=max(s_lo, s_hi, speedup), model=model,
                    assumptions=tuple(assumptions))
