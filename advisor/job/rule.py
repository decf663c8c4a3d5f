"""Job rules: the rule contract at job scope (`advisor.engine.rule.Scope.JOB`).

A rank rule reads one op graph; a job rule reads the cross-rank `Job` model (aligned steps,
matched collectives, waiting, the straggler). Both declare the same metadata on the class
(`advisor.engine.rule.RuleSpec`: code, name, mechanisms and their fixes, options, requirements,
the estimate's model text, confidence), validated when the class is defined; a job rule's
finding is a `Finding` with the ranks it concerns. Job rules register in their own entry-point
group, ``advisor.job_rules``, because `check` reads another input.
"""

from __future__ import annotations

import statistics
from abc import abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from importlib.metadata import entry_points
from string import Template
from typing import ClassVar

from advisor.config import ConfigError, RuleSettings, coerce_option
from advisor.engine.fix_variants import unknown_framework_fix
from advisor.engine.floors import Floor
from advisor.engine.registry import PluginError
from advisor.engine.rule import (
    DOC_SECTIONS,
    Category,
    Estimate,
    Evidence,
    Finding,
    Fix,
    JobRequirement,
    RuleSpec,
    Scope,
    Skipped,
    is_base,
)
from advisor.engine.runner import MIN_SPEEDUP
from advisor.job.model import Job, JobStep

GROUP = "advisor.job_rules"

JobFinding = Finding
"""A job rule's finding: a `Finding` whose ``ranks`` name the ranks it concerns."""


class JobRule(RuleSpec):
    """Base class of every job rule: the declared metadata of any rule, ``check(job)``."""

    scope: ClassVar[Scope] = Scope.JOB
    category: ClassVar[Category] = Category.COMMUNICATION
    requires: ClassVar[tuple] = (JobRequirement.STEPS,)

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if is_base(cls):
            return
        doc = cls.__doc__ or ""
        missing = [s for s in DOC_SECTIONS if f"{s}\n" not in doc]
        if missing:
            raise TypeError(f"job rule {cls.__qualname__}: docstring lacks {', '.join(missing)}")

    def __init__(self, options: Mapping[str, float | int | str | bool] | None = None) -> None:
        self._options = dict(options or {})

    def option(self, key: str) -> float | int | str | bool:
        """The setting of one declared option (``--rule-option``, [tool.advisor])."""
        return self._options.get(key, self.options[key].default)

    @abstractmethod
    def check(self, job: Job) -> Iterable[Finding]:
        """Yield findings through `finding`; estimates come from `estimate`."""

    def estimate(self, job: Job, mechanism: str, saving: Saving, low: Saving, high: Saving,
                 assumptions: Sequence[str] = (),
                 floor: tuple[Saving, Saving, Saving] | None = None,
                 params: Mapping[str, object] | None = None) -> Estimate:
        """The job what-if (`job_estimate`) with the model text this rule declares for
        ``mechanism`` and its declared assumptions before ``assumptions``."""
        model = self.model if isinstance(self.model, str) else self.model[mechanism]
        values = {k: str(v) for k, v in (params or {}).items()}
        return job_estimate(job, saving, low, high, Template(model).substitute(values),
                            (*self.assumptions, *assumptions), floor=floor)

    def finding(self, job: Job, mechanism: str, message: str, estimate: Estimate,
                quantities: Mapping[str, float], ranks: Sequence[int] | None = None,
                params: Mapping[str, object] | None = None) -> Finding:
        """A finding with the fix this rule declares for ``mechanism``: the job does not say
        which framework runs the loop, so a mechanism with knobs of several frameworks gives
        them side by side (`advisor.engine.fix_variants`), as a bare nsys capture does."""
        values = {k: str(v) for k, v in (params or {}).items()}
        frameworks = {v.framework for v in self.fixes if v.mechanism == mechanism}
        if frameworks == {"pytorch"}:
            v = self.fix_for(mechanism, "pytorch")
            fix = Fix(Template(v.title).substitute(values), Template(v.snippet).substitute(values),
                      kind=v.kind, mechanism=mechanism)
        else:
            fix = unknown_framework_fix(type(self), mechanism, values, (), "unknown")
        return Finding(self.name, self.code, message,
                       Evidence(steps=tuple(s.index for s in job.steps), quantities=dict(quantities)),
                       fix, estimate, self.confidence,
                       ranks=tuple(job.rank_ids if ranks is None else ranks),
                       validation=self.validation)


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


@dataclass(frozen=True)
class JobRuleChoice:
    """The job rules picked by ``--select``/``--ignore`` and their options."""

    rules: tuple[type[JobRule], ...]
    options: Mapping[str, Mapping[str, float | int | str | bool]]


def split_settings(settings: RuleSettings) -> tuple[JobRuleChoice, RuleSettings | None]:
    """``--select``/``--ignore``/``--rule-option`` name rank rules and job rules alike (by name
    or code), as one trace's analysis names its rules: the job rules picked with their options,
    and the settings of the rank rules (None when the selection names job rules only, so no
    rank rule runs). Unknown names and options are the resolvers' errors, before any work."""
    from advisor.config import resolve
    from advisor.engine.registry import load_rules

    rules = load_job_rules()
    by_key = {key: r for r in rules for key in (r.name, r.code, *r.aliases)}
    job_options: dict[str, dict[str, float | int | str | bool]] = {}
    for name, values in settings.options.items():
        if name in by_key:
            rule = by_key[name]
            job_options[rule.name] = {k: _option_value(rule, k, v) for k, v in values.items()}
    job_select = [n for n in settings.select if n in by_key]
    rank_select = tuple(n for n in settings.select if n not in by_key)
    ignored = {by_key[n].name for n in settings.ignore if n in by_key}
    rank = replace(settings, select=rank_select,
                   ignore=tuple(n for n in settings.ignore if n not in by_key),
                   options={k: v for k, v in settings.options.items() if k not in by_key})
    resolve(load_rules(), rank)  # unknown names and bad options fail here, before any work
    chosen = [by_key[n] for n in dict.fromkeys(job_select)] if settings.select else rules
    chosen = [r for r in chosen if r.name not in ignored]
    return (JobRuleChoice(tuple(chosen), job_options),
            None if settings.select and not rank_select else rank)


def _option_value(rule: type[JobRule], key: str, value: object) -> float | int | str | bool:
    """One job rule option's value, checked against its declaration as a rank rule's is."""
    if key not in rule.options:
        known = ", ".join(rule.options) or "none"
        raise ConfigError(f"rule options: job rule {rule.name} has no option {key!r} "
                          f"(its options: {known})")
    return coerce_option(rule, key, value, "rule options")  # type: ignore[return-value]


def unmet(rule: type[JobRule], job: Job) -> str | None:
    """Why ``rule`` cannot run on this job (its first unmet requirement); None: it can."""
    for req in rule.requires:
        if req is JobRequirement.STEPS and not job.steps:
            return "no steps aligned across the ranks"
        if req is JobRequirement.COLLECTIVES and not any(
                job.rank_steps[r][s.index].collectives for r in job.rank_ids for s in job.steps):
            return ("no collective communication kernels in the aligned steps (a CPU-only or "
                    "gloo job, or a window without collectives)")
        if req is JobRequirement.THREE_RANKS and len(job.rank_ids) < 3:
            return (f"{len(job.rank_ids)} ranks: with two, the slower one is the straggler "
                    "(straggler-rank)")
    return None


@dataclass(frozen=True)
class JobRuleResults:
    """The job rules' results, as `advisor.engine.runner.RuleResults` has a trace's: the
    findings reported, those under the threshold, and the rules that could not run."""

    findings: tuple[Finding, ...]
    below_threshold: tuple[Finding, ...]
    skipped: tuple[Skipped, ...]


def run_job_rule_set(job: Job, choice: JobRuleChoice | None = None,
                     min_speedup: float = MIN_SPEEDUP) -> JobRuleResults:
    """Every picked job rule on ``job``; a rule with an unmet requirement is `Skipped`."""
    rules = load_job_rules() if choice is None else choice.rules
    options = {} if choice is None else choice.options
    found: list[Finding] = []
    skipped: list[Skipped] = []
    for rule in rules:
        why = unmet(rule, job)
        if why:
            skipped.append(Skipped(rule.name, why))
            continue
        found.extend(rule(options.get(rule.name)).check(job))
    found.sort(key=lambda f: -f.estimate.speedup)
    return JobRuleResults(tuple(f for f in found if f.estimate.speedup >= min_speedup),
                          tuple(f for f in found if f.estimate.speedup < min_speedup),
                          tuple(skipped))


def run_job_rules(job: Job, min_speedup: float = MIN_SPEEDUP,
                  rules: Sequence[type[JobRule]] | None = None) -> list[Finding]:
    """The findings the job rules report (at least ``min_speedup``), best first."""
    choice = None if rules is None else JobRuleChoice(tuple(rules), {})
    return list(run_job_rule_set(job, choice, min_speedup).findings)


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
                 floor: tuple[Saving, Saving, Saving] | None = None) -> Estimate:
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
