"""Job rules: the rule contract at job scope (`advisor.engine.rule.Scope.JOB`).

A rank rule reads one op graph; a job rule reads the cross-rank `Job` model (aligned steps,
matched collectives, waiting, the straggler). Both declare the same metadata on the class
(`advisor.engine.rule.RuleSpec`: code, name, mechanisms and their fixes, options, requirements,
the estimate's model text, confidence), validated when the class is defined; a job rule's
finding is a `Finding` with the ranks it concerns, made with ``ctx.finding(...)`` as a rank
rule's is (the estimate API, `advisor.engine.estimates`; the job's what-if model is
`advisor.engine.job_whatif`). Rules of both scopes register in one entry-point group, ``advisor.rules``;
the registry tells them apart by ``scope`` (`advisor.engine.registry`).
"""

from __future__ import annotations

import inspect
import warnings
from abc import abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from string import Template
from typing import ClassVar

from advisor.config import ConfigError, RuleSettings, coerce_option
from advisor.engine.job_model import Job
from advisor.engine.job_whatif import (  # noqa: F401  (re-exported: the what-if's names before it moved)
    HOST_FLOOR,
    JobContext,
    JobEffect,
    Saving,
    job_estimate,
    job_step_ns,
)
from advisor.engine.registry import PluginDeprecationWarning, PluginError, load_specs
from advisor.engine.rule import (
    DOC_SECTIONS,
    Category,
    Estimate,
    Finding,
    JobRequirement,
    RuleSpec,
    Scope,
    Skipped,
    is_base,
)
from advisor.engine.runner import MIN_SPEEDUP

JobFinding = Finding
"""A job rule's finding: a `Finding` whose ``ranks`` name the ranks it concerns."""


class JobRule(RuleSpec):
    """Base class of every job rule: the declared metadata of any rule, ``check(job, ctx)``."""

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
    def check(self, job: Job, ctx: JobContext) -> Iterable[Finding]:
        """Yield findings through ``ctx.finding`` (the estimate API every rule uses), with
        `JobEffect`s: what the fix takes off each rank's own work per aligned step."""

    # ----- a plugin written before `ctx.finding` (deprecated) --------------------------------

    def estimate(self, job: Job, mechanism: str, saving: Saving, low: Saving, high: Saving,
                 assumptions: Sequence[str] = (),
                 floor: tuple[Saving, Saving, Saving] | None = None,
                 params: Mapping[str, object] | None = None) -> Estimate:
        """Deprecated, for a ``check(job)`` written before the job context: the estimate through
        the job context's what-if (`JobContext.what_if`), as ``ctx.finding`` reaches it."""
        model = self.model if isinstance(self.model, str) else self.model[mechanism]
        values = {k: str(v) for k, v in (params or {}).items()}
        hosts = floor or (None, None, None)
        effects = [(JobEffect(s, h),) for s, h in zip((saving, low, high), hosts, strict=True)]
        return JobContext(job).what_if(*effects, "median", Template(model).substitute(values),
                                       (*self.assumptions, *assumptions))

    def finding(self, job: Job, mechanism: str, message: str, estimate: Estimate,
                quantities: Mapping[str, float], ranks: Sequence[int] | None = None,
                params: Mapping[str, object] | None = None) -> Finding:
        """Deprecated companion of `estimate`: a finding with the declared fix and that
        estimate."""
        ctx = JobContext(job)
        return Finding(self.name, self.code, message, ctx.evidence(quantities),
                       ctx.fix(type(self), mechanism, params), estimate, self.confidence,
                       ranks=tuple(job.rank_ids if ranks is None else ranks),
                       validation=self.validation)


def _legacy_check(rule: JobRule) -> bool:
    """Whether the rule's `check` takes the job alone (a plugin written before the context)."""
    try:
        params = inspect.signature(rule.check).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) == 1 and not any(p.kind is p.VAR_POSITIONAL for p in params)


def _findings(rule: JobRule, job: Job, options: Mapping[str, object] | None) -> Iterable[Finding]:
    if not _legacy_check(rule):
        return rule.check(job, JobContext(job, {rule.name: dict(options or {})}))
    warnings.warn(f"job rule {rule.name!r}: check(job) is deprecated; take the context, "
                  "check(job, ctx), and make findings with ctx.finding(...)",
                  PluginDeprecationWarning, stacklevel=3)
    return rule.check(job)  # type: ignore[call-arg]


def load_job_rules() -> list[type[JobRule]]:
    """The registered job rules (`Scope.JOB` in ``advisor.rules``, or the deprecated
    ``advisor.job_rules``), in name order."""
    rules = load_specs(Scope.JOB)
    bad = [r.name for r in rules if not issubclass(r, JobRule)]
    if bad:
        raise PluginError(f"job rule plugin(s) {', '.join(bad)} are not JobRule classes "
                          "(advisor.job.rule.JobRule)")
    return rules  # type: ignore[return-value]


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
        found.extend(_findings(rule(options.get(rule.name)), job, options.get(rule.name)))
    found.sort(key=lambda f: -f.estimate.speedup)
    return JobRuleResults(tuple(f for f in found if f.estimate.speedup >= min_speedup),
                          tuple(f for f in found if f.estimate.speedup < min_speedup),
                          tuple(skipped))


def run_job_rules(job: Job, min_speedup: float = MIN_SPEEDUP,
                  rules: Sequence[type[JobRule]] | None = None) -> list[Finding]:
    """The findings the job rules report (at least ``min_speedup``), best first."""
    choice = None if rules is None else JobRuleChoice(tuple(rules), {})
    return list(run_job_rule_set(job, choice, min_speedup).findings)


