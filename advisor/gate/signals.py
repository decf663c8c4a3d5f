"""Anti-patterns the candidate introduced, read off counts that do not depend on timing.

A rule reports a finding only when fixing it would save 2% of the step, so a new
``cudaStreamSynchronize`` that costs 1% today goes unreported, and grows with the next change.
The gate also compares what the rules look at but that is exact in any capture: explicit
synchronizations, pageable copies and CUDA graph replays per step, and standalone GELU, FP32 GEMM
and fused attention kernels per step. Two captures of the same code give the same counts, so a
change here is the code's doing, and it is named by the rule whose anti-pattern it is.

A count that rose is a regression only when the rule agrees it costs something: the rule matched
the candidate (reported or under its threshold) with a larger saving than the baseline. An event
synchronization that guards a reused pinned buffer is a new sync, but no host waits on it.
Kernel counts are not compared when a run's CUDA graph replays hide their kernels.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from advisor.gate.inputs import GateInput, KernelRow
from advisor.gate.workload import hides_kernels
from advisor.graph.kernels import gemm_precision, is_gelu

MIN_INCREASE = 1.0
"""A count must grow by at least one per step: medians of integer counts move in whole units."""


MIN_COST_SHARE = 0.005
"""A rule's cost must grow by at least 0.5% of the step to confirm a count that rose: less is
below what two captures of the same code tell apart (an event sync guarding a reused pinned
buffer costs the host microseconds)."""


SIGNAL_RULES = frozenset({"host-sync", "pageable-memcpy", "uncaptured-cuda-graph",
                          "unfused-gemm-gelu", "fp32-matmul", "unfused-attention"})
"""Rules whose anti-pattern has a count here: for them, whether a pattern was introduced or was
already there is read off the counts, not off timing-dependent estimates."""

KERNEL_SIGNAL_RULES = frozenset({"unfused-gemm-gelu", "fp32-matmul", "unfused-attention"})


@dataclass(frozen=True)
class Signal:
    rule: str  # the rule whose anti-pattern this is
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


def _count_signals(base: GateInput, cand: GateInput) -> list[Signal]:
    out: list[Signal] = []
    b, c = base.counts, cand.counts
    if not (b and c):
        return out
    if c.get("sync_calls", 0) - b.get("sync_calls", 0) >= MIN_INCREASE:
        out.append(Signal("host-sync", "explicit synchronizations", b["sync_calls"], c["sync_calls"]))
    if c.get("pageable_copies", 0) - b.get("pageable_copies", 0) >= MIN_INCREASE:
        out.append(Signal("pageable-memcpy", "copies from or to pageable host memory",
                          b["pageable_copies"], c["pageable_copies"]))
    if b.get("graph_launches", 0) >= MIN_INCREASE and \
            b["graph_launches"] - c.get("graph_launches", 0) >= MIN_INCREASE:
        out.append(Signal("uncaptured-cuda-graph", "CUDA graph replays", b["graph_launches"],
                          c.get("graph_launches", 0)))
    return out


def kernel_counts_comparable(base: GateInput, cand: GateInput) -> bool:
    return (base.kernels_complete and cand.kernels_complete and bool(base.kernels)
            and bool(cand.kernels) and not hides_kernels(base) and not hides_kernels(cand))


def counts_comparable(base: GateInput, cand: GateInput, rule: str) -> bool:
    """Whether the counts behind ``rule``'s signal can be compared between the two runs."""
    if rule in KERNEL_SIGNAL_RULES:
        return kernel_counts_comparable(base, cand)
    return rule in SIGNAL_RULES and bool(base.counts) and bool(cand.counts)


def _kernel_signals(base: GateInput, cand: GateInput) -> list[Signal]:
    out: list[Signal] = []
    if not kernel_counts_comparable(base, cand):
        return out

    def gelu(k: KernelRow) -> bool:
        return is_gelu(k.name)

    gelu_b, gelu_c = _kernel_count(base, gelu), _kernel_count(cand, gelu)
    gemm_growth = _kernel_count(cand, _is_gemm) - _kernel_count(base, _is_gemm)
    # More GEMMs and GELUs together is a bigger model; more GELUs alone is an unfused epilogue.
    if gelu_c - gelu_b >= MIN_INCREASE and gemm_growth < gelu_c - gelu_b:
        out.append(Signal("unfused-gemm-gelu", "standalone GELU kernels", gelu_b, gelu_c))

    def fp32(k: KernelRow) -> bool:
        return _is_gemm(k) and gemm_precision(k.name) == "fp32"

    fp32_b, fp32_c = _kernel_count(base, fp32), _kernel_count(cand, fp32)
    if fp32_c - fp32_b >= MIN_INCREASE:
        out.append(Signal("fp32-matmul", "FP32 GEMM kernels", fp32_b, fp32_c))

    def fused_attention(k: KernelRow) -> bool:
        return k.category == "attention"

    def softmax(k: KernelRow) -> bool:
        return k.category == "softmax"

    att_b, att_c = _kernel_count(base, fused_attention), _kernel_count(cand, fused_attention)
    soft_growth = _kernel_count(cand, softmax) - _kernel_count(base, softmax)
    if att_b - att_c >= MIN_INCREASE and soft_growth >= MIN_INCREASE:
        out.append(Signal("unfused-attention", "fused attention kernels", att_b, att_c))
    return out


def _saving(x: GateInput, rule: str) -> float:
    return sum(f.saved_ms for f in x.findings if f.rule == rule)


def anti_pattern_signals(base: GateInput, cand: GateInput, known_rules: set[str]) -> list[Signal]:
    """Counts that rose the way an installed rule's anti-pattern does, each marked confirmed
    when that rule saw a larger cost in the candidate."""
    out = []
    for s in _count_signals(base, cand) + _kernel_signals(base, cand):
        if s.rule in known_rules:
            grown = _saving(cand, s.rule) - _saving(base, s.rule)
            confirmed = grown > MIN_COST_SHARE * cand.median_ms
            out.append(replace(s, confirmed=confirmed))
    return out
