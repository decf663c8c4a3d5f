"""Anti-patterns the candidate introduced, read off counts that do not depend on timing.

A rule reports a finding only when fixing it would save 2% of the step, so a new
``cudaStreamSynchronize`` that costs 1% today goes unreported, and grows with the next change.
The gate also compares what the rules look at but that is exact in any capture: explicit
synchronizations, pageable copies and CUDA graph replays per step, and standalone GELU, FP32 GEMM
and fused attention kernels per step. Two captures of the same code give the same counts, so a
change here is the code's doing, and it is named by the rule whose anti-pattern it is: the rule
that declares the signal (`RuleSpec.gate_signals`), so a team's rule can claim one too.

A count that rose is a regression only when the rule agrees it costs something: the rule matched
the candidate (reported or under its threshold) with a larger saving than the baseline. An event
synchronization that guards a reused pinned buffer is a new sync, but no host waits on it.
Kernel counts are not compared when a run's CUDA graph replays hide their kernels.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property

from advisor.engine.rule import GATE_SIGNALS
from advisor.gate.inputs import GateInput, KernelRow
from advisor.gate.workload import hides_kernels
from advisor.graph.kernels import gemm_precision, is_gelu

MIN_INCREASE = 1.0
"""A count must grow by at least one per step: medians of integer counts move in whole units."""


MIN_COST_SHARE = 0.005
"""A rule's cost must grow by at least 0.5% of the step to confirm a count that rose: less is
below what two captures of the same code tell apart (an event sync guarding a reused pinned
buffer costs the host microseconds)."""


KERNEL_SIGNALS = frozenset({"standalone-gelu", "fp32-gemms", "fused-attention"})
"""Signals counted off the kernels per step (the rest off the counts of calls and copies)."""


@dataclass(frozen=True)
class RuleRoles:
    """What the installed rules declare for the gate (`advisor.engine.rule.RuleSpec`): the
    signals each rule's anti-pattern moves, and the rules that point at an upgrade."""

    signals: Mapping[str, tuple[str, ...]]  # rule -> the `GATE_SIGNALS` it declares
    opportunities: frozenset[str]

    @cached_property
    def rule_of(self) -> dict[str, str]:
        """Signal -> the rule that declares it (the first by name, if two do)."""
        out: dict[str, str] = {}
        for rule in sorted(self.signals):
            for sig in self.signals[rule]:
                out.setdefault(sig, rule)
        return out


def rule_roles() -> RuleRoles:
    """The installed rules' gate roles, read off their declarations."""
    from advisor.engine.registry import load_rules

    rules = load_rules()
    return RuleRoles({r.name: r.gate_signals for r in rules if r.gate_signals},
                     frozenset(r.name for r in rules if r.opportunity))


@dataclass(frozen=True)
class Signal:
    rule: str  # the rule whose anti-pattern this is (it declares the signal)
    what: str  # what was counted, per step
    base: float
    cand: float
    confirmed: bool = True  # the rule matched the candidate with a larger saving

    @property
    def message(self) -> str:
        return f"{self.what} per step: {_n(self.base)} -> {_n(self.cand)}"


def _n(x: float) -> str:
    return f"{x:.0f}" if abs(x - round(x)) < 0.05 else f"{x:.1f}"


def _kernel_count(x: GateInput, keep: Callable[[KernelRow], bool]) -> float:
    return sum(k.count_per_step for k in x.kernels if keep(k))


def _is_gemm(k: KernelRow) -> bool:
    return k.category in ("gemm", "convolution")


Count = tuple[str, float, float]
"""A signal that moved the bad way: its `GATE_SIGNALS` name, the baseline's and candidate's
count per step."""


def _count_signals(base: GateInput, cand: GateInput) -> list[Count]:
    out: list[Count] = []
    b, c = base.counts, cand.counts
    if not (b and c):
        return out
    if c.get("sync_calls", 0) - b.get("sync_calls", 0) >= MIN_INCREASE:
        out.append(("sync-calls", b["sync_calls"], c["sync_calls"]))
    if c.get("pageable_copies", 0) - b.get("pageable_copies", 0) >= MIN_INCREASE:
        out.append(("pageable-copies", b["pageable_copies"], c["pageable_copies"]))
    if b.get("graph_launches", 0) >= MIN_INCREASE and \
            b["graph_launches"] - c.get("graph_launches", 0) >= MIN_INCREASE:
        out.append(("graph-replays", b["graph_launches"], c.get("graph_launches", 0)))
    return out


def kernel_counts_comparable(base: GateInput, cand: GateInput) -> bool:
    return (base.kernels_complete and cand.kernels_complete and bool(base.kernels)
            and bool(cand.kernels) and not hides_kernels(base) and not hides_kernels(cand))


def counts_comparable(base: GateInput, cand: GateInput, rule: str, roles: RuleRoles) -> bool:
    """Whether the counts behind ``rule``'s declared signals can be compared between the runs."""
    declared = roles.signals.get(rule, ())
    if not declared:
        return False
    if any(s in KERNEL_SIGNALS for s in declared):
        return kernel_counts_comparable(base, cand)
    return bool(base.counts) and bool(cand.counts)


def _kernel_signals(base: GateInput, cand: GateInput) -> list[Count]:
    out: list[Count] = []
    if not kernel_counts_comparable(base, cand):
        return out

    def gelu(k: KernelRow) -> bool:
        return is_gelu(k.name)

    gelu_b, gelu_c = _kernel_count(base, gelu), _kernel_count(cand, gelu)
    gemm_growth = _kernel_count(cand, _is_gemm) - _kernel_count(base, _is_gemm)
    # More GEMMs and GELUs together is a bigger model; more GELUs alone is an unfused epilogue.
    if gelu_c - gelu_b >= MIN_INCREASE and gemm_growth < gelu_c - gelu_b:
        out.append(("standalone-gelu", gelu_b, gelu_c))

    def fp32(k: KernelRow) -> bool:
        return _is_gemm(k) and gemm_precision(k.name) == "fp32"

    fp32_b, fp32_c = _kernel_count(base, fp32), _kernel_count(cand, fp32)
    if fp32_c - fp32_b >= MIN_INCREASE:
        out.append(("fp32-gemms", fp32_b, fp32_c))

    def fused_attention(k: KernelRow) -> bool:
        return k.category == "attention"

    def softmax(k: KernelRow) -> bool:
        return k.category == "softmax"

    att_b, att_c = _kernel_count(base, fused_attention), _kernel_count(cand, fused_attention)
    soft_growth = _kernel_count(cand, softmax) - _kernel_count(base, softmax)
    if att_b - att_c >= MIN_INCREASE and soft_growth >= MIN_INCREASE:
        out.append(("fused-attention", att_b, att_c))
    return out


def _saving(x: GateInput, rule: str) -> float:
    return sum(f.saved_ms for f in x.findings if f.rule == rule)


def anti_pattern_signals(base: GateInput, cand: GateInput, roles: RuleRoles) -> list[Signal]:
    """Counts that rose the way an installed rule's anti-pattern does (the rule declares the
    signal), each marked confirmed when that rule saw a larger cost in the candidate."""
    out = []
    for name, b, c in _count_signals(base, cand) + _kernel_signals(base, cand):
        rule = roles.rule_of.get(name)
        if rule is not None:
            grown = _saving(cand, rule) - _saving(base, rule)
            confirmed = grown > MIN_COST_SHARE * cand.median_ms
            out.append(Signal(rule, GATE_SIGNALS[name], b, c, confirmed))
    return out
