"""All step fixes together, as a path: which fix comes first, and what the step is after each.

A conditional finding (`advisor.engine.precedence`) is an estimate for the step *after* its
primary is fixed; it is combined only with that primary, right after it, never on its own and
never multiplied with the others (issue #34: a loader fix and CUDA graphs conditional on it
multiplied into 19.6x, where the best combination measured 1.41x). Independent findings come
first, by their own gain. Each step of the path is one replay of every fix so far together
(each change once, `merge`), held at the step's floors (`advisor.engine.floors`), and never
slower than the step before it: fixes only take work away, so a longer replayed step is the
model's noise, not the fix's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from advisor.engine.context import RuleContext
from advisor.engine.effects import merge
from advisor.engine.rule import Estimate, Finding, PathStep


def order(findings: Sequence[Finding]) -> list[Finding]:
    """The findings in the order they combine: independent ones by their own gain, each
    conditional one right after the finding it depends on. A conditional finding whose
    primary is not among ``findings`` is left out: its estimate assumes a fix not proposed."""
    dependants: dict[str, list[Finding]] = {}
    for f in findings:
        if f.conditional_on is not None:
            dependants.setdefault(f.conditional_on, []).append(f)
    out: list[Finding] = []

    def place(f: Finding) -> None:
        out.append(f)
        for d in sorted(dependants.get(f.rule, ()), key=lambda x: -x.estimate.speedup):
            if d not in out:
                place(d)

    for f in sorted((f for f in findings if f.conditional_on is None),
                    key=lambda x: -x.estimate.speedup):
        place(f)
    return out


def _effects(findings: Sequence[Finding], attr: str) -> list:
    return merge([e for f in findings for e in getattr(f, attr)])


def _share(ctx: RuleContext, effects: list, basis: str) -> float:
    """The step after ``effects`` as a share of the step before, on ``basis``."""
    before, after = ctx.before_after(effects, basis)
    return after / before if before > 0 else 1.0


def combined_estimate(ctx: RuleContext, findings: Sequence[Finding]) -> Estimate:
    """All findings' fixes applied together along their path (`order`), the floor that binds
    the last step, and the path itself (`Estimate.path`).

    The pessimistic and optimistic bounds are replays too (every finding's low, resp. high,
    effects together), not the central estimate scaled."""
    basis = "mean" if any(f.estimate.basis == "mean" for f in findings) else "median"
    ordered = order(findings) or list(findings)
    # Worked in shares of the step (the replay's on ``basis``), shown on the report's step.
    report_step = ctx.baseline_step_ns
    path: list[PathStep] = []
    share = 1.0
    for k, f in enumerate(ordered):
        effects = _effects(ordered[:k + 1], "effects")
        share = min(share, _share(ctx, effects, basis))
        floor, _ = ctx.bound_by(effects, basis)
        path.append(PathStep(f.rule, report_step * share, f.conditional_on, floor))
    share_low = _share(ctx, _effects(ordered, "low_effects"), basis)
    share_high = _share(ctx, _effects(ordered, "high_effects"), basis)
    # All together are never slower than the best independent fix alone.
    alone = [f for f in ordered if f.conditional_on is None] or ordered
    share = min(share, 1 / max(f.estimate.speedup for f in alone))
    share_low = min(share_low, 1 / max(f.estimate.low for f in alone))
    share_high = min(share_high, share_low, share)
    effects = _effects(ordered, "effects")
    floor, binds = ctx.bound_by(effects, basis)
    held = floor.ns / report_step if floor is not None and report_step else 0.0
    share, share_high = max(share, held), max(share_high, held)  # never below the floor
    share_low = max(share_low, share)
    if path:
        path[-1] = replace(path[-1], predicted_step_ns=report_step * share)

    def ratio(new: float) -> float:
        return 1 / new if new > 0 else 1.0

    estimate = ctx.estimate(
        ratio(share),
        low=max(1.0, ratio(share_low)),
        high=ratio(share_high),
        model="the findings' fixes applied together (each change once) in one replay of the "
              "analysed steps, conditional ones only after the fix they depend on, held at the "
              "step's floors; bounds replayed from every finding's pessimistic/optimistic effects",
        assumptions=("fixes do not interact beyond what the replay models",),
        basis=basis,
        floor=floor,
        floor_binds=binds,
    )
    return replace(estimate, path=tuple(path))
