"""Anti-patterns the candidate introduced, read off counts that do not depend on timing.

A rule reports a finding only when fixing it would save 2% of the step, so a new
``cudaStreamSynchronize`` that costs 1% today goes unreported, and grows with the next change.
The gate also compares what the rules look at but that is exact in any capture: explicit
synchronizations, pageable copies and CUDA graph replays per step, and standalone GELU, FP32 GEMM
and fused attention kernels per step. Two captures of the same code give the same counts, so a
change here is the code's doing, and it is named by the rule whose anti-pattern it is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from advisor.gate.inputs import GateInput, KernelRow
from advisor.graph.kernels import gemm_precision, is_gelu

MIN_INCREASE = 1.0
"""A count must grow by at least one per step: medians of integer counts move in whole units."""


@dataclass(frozen=True)
class Signal:
    rule: str  # the rule whose anti-pattern this is
    what: str  # what was counted, per step
    base: float
    cand: float

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


def _kernel_signals(base: GateInput, cand: GateInput) -> list[Signal]:
    out: list[Signal] = []
    if not (base.kernels_complete and cand.kernels_complete and base.kernels and cand.kernels):
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


def anti_pattern_signals(base: GateInput, cand: GateInput, known_rules: set[str]) -> list[Signal]:
    """Count changes that introduce an anti-pattern, for the rules installed here."""
    return [s for s in _count_signals(base, cand) + _kernel_signals(base, cand)
            if s.rule in known_rules]
