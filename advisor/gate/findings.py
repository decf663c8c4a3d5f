"""Which rule findings the candidate introduced or made worse, and which it fixed.

Findings are compared per rule on the time their fix would save per step (the rules' what-if
estimate), not on their speedup ratios, which move whenever the step time moves. A rule that
matched under the reporting threshold in the baseline (`below_threshold`) counts with its saving,
so an anti-pattern hovering around the threshold does not flip between "new" and "fixed" from one
capture to the next.

A finding can also grow without the candidate introducing anything: fix a host sync and the
launch overhead it hid becomes the critical path; move GEMMs from FP32 to BF16 and they become
FP8 candidates. Such a finding is "unmasked", reported but not a regression, when the counts show
the pattern did not grow (`signals`) or the rule points at an upgrade rather than a mistake, and
the step did not get slower.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from advisor.gate.inputs import FindingRow, GateInput
from advisor.gate.signals import RuleRoles, counts_comparable

MIN_DELTA_FRACTION = 0.01
"""A finding changes only if its saving moved by at least this share of the baseline step:
below it two captures of the same code disagree."""

WORSE_RATIO = 1.25
"""A finding present in both runs is worse when its saving grew by at least this factor."""


@dataclass(frozen=True)
class RuleCost:
    reported: bool
    saved_ms: float
    speedup: float
    code: str
    message: str


@dataclass(frozen=True)
class FindingChange:
    rule: str
    code: str
    status: str  # "new", "worse", "unmasked", "host-noise", "fixed", "better" or "same"
    base_saved_ms: float
    cand_saved_ms: float
    cand_speedup: float | None  # the candidate's estimated speedup from fixing it
    message: str

    @property
    def regressed(self) -> bool:
        return self.status in ("new", "worse")


def _per_rule(rows: Iterable[FindingRow]) -> dict[str, RuleCost]:
    """One cost per rule: a rule may report several findings (one per kernel, say)."""
    out: dict[str, RuleCost] = {}
    for r in sorted(rows, key=lambda r: -r.saved_ms):
        prev = out.get(r.rule)
        if prev is None:
            out[r.rule] = RuleCost(r.reported, r.saved_ms, r.speedup, r.code, r.message)
        else:
            out[r.rule] = RuleCost(prev.reported or r.reported, prev.saved_ms + r.saved_ms,
                                   max(prev.speedup, r.speedup), prev.code or r.code,
                                   prev.message or r.message)
    return out


def _status(base: RuleCost | None, cand: RuleCost | None, min_delta: float) -> str:
    b_saved = base.saved_ms if base else 0.0
    c_saved = cand.saved_ms if cand else 0.0
    b_rep = bool(base and base.reported)
    c_rep = bool(cand and cand.reported)
    delta = c_saved - b_saved
    if c_rep and not b_rep:
        return "new" if delta >= min_delta else "same"
    if b_rep and not c_rep:
        return "fixed"
    if delta >= min_delta and c_saved >= WORSE_RATIO * b_saved:
        return "worse"
    if -delta >= min_delta and b_saved >= WORSE_RATIO * c_saved:
        return "better"
    return "same"


def compare_findings(base: GateInput, cand: GateInput) -> list[FindingChange]:
    """Every rule reported by either run, with what happened to it."""
    b, c = _per_rule(base.findings), _per_rule(cand.findings)
    min_delta = MIN_DELTA_FRACTION * base.median_ms
    out: list[FindingChange] = []
    for rule in sorted(set(b) | set(c)):
        bb, cc = b.get(rule), c.get(rule)
        if not (bb and bb.reported) and not (cc and cc.reported):
            continue
        status = _status(bb, cc, min_delta)
        shown = cc if cc and cc.reported else bb
        assert shown is not None
        out.append(FindingChange(
            rule=rule,
            code=(cc.code if cc else "") or (bb.code if bb else ""),
            status=status,
            base_saved_ms=bb.saved_ms if bb else 0.0,
            cand_saved_ms=cc.saved_ms if cc else 0.0,
            cand_speedup=cc.speedup if cc and cc.reported else None,
            message=shown.message,
        ))
    return sorted(out, key=_order)


def _order(f: FindingChange) -> tuple[int, float]:
    order = ("new", "worse", "unmasked", "host-noise", "fixed", "better", "same")
    return order.index(f.status), -f.cand_saved_ms


def introduced(f: FindingChange, base: GateInput, cand: GateInput, grown: set[str],
               slower: bool, roles: RuleRoles) -> bool:
    """Whether a new or worse finding is the candidate's doing rather than unmasked.

    ``grown``: rules whose anti-pattern counts rose (confirmed signals); ``slower``: the step
    time regressed (then nothing is excused here: the slowdown needs its explanation);
    ``roles``: what the rules declare (their signals; whether they point at an upgrade, which
    a change exposes without introducing anything).
    """
    if slower:
        return True
    if counts_comparable(base, cand, f.rule, roles):
        return f.rule in grown
    return f.rule not in roles.opportunities


def mark_unmasked(changes: list[FindingChange], base: GateInput, cand: GateInput,
                  grown: set[str], slower: bool, roles: RuleRoles) -> list[FindingChange]:
    out = [replace(f, status="unmasked")
           if f.regressed and not introduced(f, base, cand, grown, slower, roles) else f
           for f in changes]
    return sorted(out, key=_order)


def mark_host_noise(changes: list[FindingChange]) -> list[FindingChange]:
    """Under host timing noise, estimates that depend on host timing move with it."""
    return sorted((replace(f, status="host-noise") if f.regressed else f for f in changes),
                  key=_order)
