"""The estimate API every rule reaches, whatever its scope: ``ctx.finding(...)``.

A rule's `check` says what it matched (message, evidence, the mechanism, the effects of the fix
and their pessimistic and optimistic variants, the parameters of its declared texts); the
context assembles the rest from the rule's declaration (fix, model text, assumptions,
confidence) and asks its what-if model for the estimate. A rank rule's context replays the
trace's steps (`advisor.engine.context.RuleContext`); a job rule's replays the job's steps over
all ranks (`advisor.engine.job_whatif.JobContext`). One entry point, two models: a rule never computes
a speedup, and a finding is assembled the same way at both scopes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from string import Template
from typing import Any, ClassVar

from advisor.engine.rule import Confidence, Estimate, Evidence, Finding, Fix


class EstimateAPI(ABC):
    """What a rule's `check` calls to make a finding: `finding`. Subclasses give the scope's
    declared fix (`fix`) and what-if model (`what_if`)."""

    # Whether findings keep their effects: a rank finding's are replayed again when all fixes
    # are combined (`advisor.engine.combine`); a job finding is never combined.
    keeps_effects: ClassVar[bool] = True

    @abstractmethod
    def fix(self, rule: type, mechanism: str, params: Mapping[str, object] | None = None,
            requires: tuple[str, ...] = ()) -> Fix:
        """The rule's declared fix for ``mechanism``, filled from ``params``."""

    @abstractmethod
    def what_if(self, effects: Sequence[Any], low_effects: Sequence[Any] | None,
                high_effects: Sequence[Any] | None, basis: str, model: str,
                assumptions: Sequence[str]) -> Estimate:
        """The estimate of applying ``effects`` (low/high: the variants; None: the same)."""

    def caveats(self, effects: Sequence[Any]) -> tuple[str, ...]:
        """Assumptions the model adds for these effects (a rank replay that did not settle)."""
        return ()

    def finding(
        self,
        rule: type,
        message: str,
        evidence: Evidence,
        effects: Sequence[Any],
        fix: Fix | None = None,
        model: str | None = None,
        assumptions: Sequence[str] | None = None,
        confidence: Confidence | None = None,
        low_effects: Sequence[Any] | None = None,
        high_effects: Sequence[Any] | None = None,
        basis: str = "median",
        mechanism: str | None = None,
        params: Mapping[str, object] | None = None,
        requires: tuple[str, ...] = (),
        extra_assumptions: Sequence[str] = (),
        ranks: Sequence[int] = (),
    ) -> Finding:
        """A finding whose estimate is the what-if of ``effects``; ``low_effects``/
        ``high_effects`` are the pessimistic and optimistic variants.

        What the rule declares (its fix for ``mechanism``, model text, assumptions, confidence)
        is assembled here, filled from ``params``; ``check`` passes only what it matched.
        ``fix``/``model``/``assumptions``/``confidence`` given here override the declaration
        (a plugin written before declarations). ``ranks``: the ranks a job finding concerns."""
        values = {k: str(v) for k, v in (params or {}).items()}
        if fix is None:
            if mechanism is None:
                raise ValueError(f"{rule.name}: a finding needs a mechanism (or a Fix)")
            fix = self.fix(rule, mechanism, params, requires)
        if model is None:
            text = rule.model if isinstance(rule.model, str) else rule.model[fix.mechanism]
            model = Template(text).substitute(values)
        if assumptions is None:
            assumptions = tuple(Template(a).substitute(values) for a in rule.assumptions)
        assumptions = (*assumptions, *extra_assumptions, *self.caveats(effects))
        estimate = self.what_if(effects, low_effects, high_effects, basis, model, assumptions)
        kept = self.keeps_effects
        return Finding(
            rule=rule.name,
            code=rule.code,
            message=message,
            evidence=evidence,
            fix=fix,
            estimate=estimate,
            confidence=rule.confidence if confidence is None else confidence,
            effects=tuple(effects) if kept else (),
            low_effects=tuple(low_effects if low_effects is not None else effects) if kept else (),
            high_effects=tuple(high_effects if high_effects is not None else effects) if kept else (),
            ranks=tuple(ranks),
            validation=getattr(rule, "validation", None),
        )
