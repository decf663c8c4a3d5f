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


def combined_estimate(ctx: RuleContext, findings: Sequence[Finding]) -> Estimate:
    """All findings' fixes applied together along their path (`order`), the floor that binds
    the last step, and the path itself (`Estimate.path`).

    The pessimistic and optimistic bounds are replays too (every finding's low, resp. high,
    effects together), not the central estimate scaled."""
    basis = "mean" if any(f.estimate.basis == "mean" for f in findings) else "median"
    ordered = order(findings) or list(findings)
    path: list[PathStep] = []
    step_ns = after = ctx.baseline_step_ns
    for k, f in enumerate(ordered):
        effects = _effects(ordered[:k + 1], "effects")
        step_ns, now = ctx.before_after(effects, basis)
        after = min(after, now) if path else min(step_ns, now)
        floor, _ = ctx.bound_by(effects, basis)
        path.append(PathStep(f.rule, after, f.conditional_on, floor))
    _, after_low = ctx.before_after(_effects(ordered, "low_effects"), basis)
    _, after_high = ctx.before_after(_effects(ordered, "high_effects"), basis)
    # All together are never slower than the best independent fix alone.
    alone = [f for f in ordered if f.conditional_on is None] or ordered
    best = max(f.estimate.speedup for f in alone)
    after = min(after, step_ns / best)
    after_low = min(after_low, step_ns / max(f.estimate.low for f in alone))
    after_high = min(after_high, after_low, after)
    effects = _effects(ordered, "effects")
    floor, binds = ctx.bound_by(effects, basis)
    held = floor.ns if floor is not None else 0.0  # no combination goes below the floor
    after, after_high = max(after, held), max(after_high, held)
    after_low = max(after_low, after)

    def ratio(new: float) -> float:
        return step_ns / new if new > 0 else 1.0

    estimate = ctx.estimate(
        ratio(after),
        low=max(1.0, ratio(after_low)),
        high=ratio(after_high),
        model="the findings' fixes applied together (each change once) in one replay of the "
              "analysed steps, conditional ones only after the fix they depend on, held at the "
              "step's floors; bounds replayed from every finding's pessimistic/optimistic effects",
        assumptions=("fixes do not interact beyond what the replay models",),
        basis=basis,
        floor=floor,
        floor_binds=binds,
    )
    return replace(estimate, path=tuple(path))
