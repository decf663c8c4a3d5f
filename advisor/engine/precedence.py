"""Causal precedence: time one finding's cause explains is not claimed again by another.

A step that waits for its input leaves the GPU idle; a launch-bound check sees the same idle
GPU. A loss that syncs to move values to the host blocks the host; the sync check sees the same
blocked host. Each rule declares which other rules' causes can explain part of what it measures
(``Rule.explained_by``). Where both are found, the secondary's gain is re-estimated for the
situation after the primary is fixed, by one replay with both fixes against one with the
primary's alone (the same what-if model as every estimate, `advisor.engine.whatif`):

- under the reporting threshold there: it was the primary's time, and the secondary is dropped
  from the findings (kept among the matches below the threshold, marked as explained);
- above it: it stays, marked conditional on the primary, with that estimate, and keeps its
  estimate alone (`Finding.alone`): what `--try` measures and what the findings are ranked by.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from advisor.engine.context import RuleContext
from advisor.engine.effects import merge
from advisor.engine.rule import Finding, Rule


def _after(ctx: RuleContext, finding_sets: Sequence[Finding], attr: str, basis: str) -> float:
    return ctx.before_after(merge([e for f in finding_sets for e in getattr(f, attr)]), basis)[1]


def conditional(ctx: RuleContext, primary: Finding, secondary: Finding, why: str) -> Finding:
    """``secondary`` re-estimated for after ``primary`` is fixed."""
    basis = "mean" if "mean" in (primary.estimate.basis, secondary.estimate.basis) else "median"

    def gain(attr: str) -> float:
        first = _after(ctx, [primary], attr, basis)
        both = _after(ctx, [primary, secondary], attr, basis)
        return first / both if both > 0 else 1.0

    speedup, low, high = gain("effects"), gain("low_effects"), gain("high_effects")
    low, high = min(low, speedup), max(high, speedup)
    e = secondary.estimate
    floor, binds = ctx.bound_by(merge([*primary.effects, *secondary.effects]), basis)
    # The report keeps one baseline step (every estimate's ``step_ns``); the speedup is the
    # gain on the step as it will be once the primary is fixed, which the assumptions say.
    estimate = replace(e, predicted_step_ns=e.step_ns / speedup if speedup > 0 else e.step_ns,
                       speedup=speedup, low=min(1.0, low) if e.withheld else low, high=high,
                       floor=floor, floor_binds=binds,
                       assumptions=(*e.assumptions, f"{primary.rule} is fixed first ({why})"))
    return replace(secondary, estimate=estimate, conditional_on=primary.rule, explained=why,
                   alone=e)


def apply(ctx: RuleContext, rules: Mapping[str, type[Rule]], findings: list[Finding],
          weak: list[Finding], min_speedup: float) -> tuple[list[Finding], list[Finding]]:
    """Findings and below-threshold matches after precedence, ordered by what each fix gives
    applied on its own (`Finding.rank_speedup`): a conditional finding whose fix alone beats its
    primary's comes first, as the fix to make first."""
    by_rule = {f.rule: f for f in findings}
    kept: list[Finding] = []
    for f in findings:
        rule = rules.get(f.rule)
        primaries = [(by_rule[p], why) for p, why in getattr(rule, "explained_by", {}).items()
                     if p in by_rule and p != f.rule]
        if not primaries:
            kept.append(f)
            continue
        # the primary that explains the most of it: the one after whose fix it gains the least
        candidates = [conditional(ctx, p, f, why) for p, why in primaries]
        c = min(candidates, key=lambda x: x.estimate.speedup)
        (kept if c.estimate.speedup >= min_speedup else weak).append(c)
    # a finding withheld on its own (no number to rank it by) goes after the priced ones
    kept.sort(key=lambda f: (bool(f.estimate.withheld) and not ctx.basis.withheld, -f.rank_speedup))
    return kept, weak
