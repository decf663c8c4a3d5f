"""fp8-candidate: large BF16/FP16 GEMMs dominate an H100 step that FP8 would speed up."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from advisor.engine.context import RuleContext
from advisor.engine.effects import SetOpDurations
from advisor.engine.hardware import BF16_TO_FP8_GEMM_FACTOR
from advisor.engine.rule import Category, Confidence, Evidence, Finding, Fix, Rule, Status
from advisor.graph.kernels import KernelCategory, classify, op_precision, short_name
from advisor.graph.model import GpuOpKind, OpGraph
from advisor.graph.queries import op_share, per_step, steps_ops

FP8_MIN_GEMM_NS = 50_000
"""Only GEMMs at least this long on H100 (>= ~35 GFLOP at the BF16 rate, dims around 2048 and
up) are compute-bound enough for FP8's 2x rate to outweigh the amax/scale/cast kernels it adds."""
FP8_FACTOR_LOW = 0.80
"""Pessimistic FP8 factor: delayed scaling done poorly, casts not fused (0.8 of BF16 time)."""
FP8_FACTOR_HIGH = 0.50
"""Optimistic FP8 factor: the 2x tensor-core peak with casts fused into neighbours."""
_HOPPER = ("H100", "H200", "H800", "H20", "GH200")


def is_hopper(graph: OpGraph) -> bool:
    names = [g.name for g in graph.info.gpus]
    if names:
        return any(h in n for n in names for h in _HOPPER) or any(
            (g.compute_capability or "").startswith("9.") for g in graph.info.gpus)
    return any("sm90" in o.name for o in graph.gpu_ops[:20000])


class Fp8Candidate(Rule):
    """Large BF16/FP16 GEMMs dominate the step: FP8 (Transformer Engine) would run them faster.

    What it detects
    ---------------
    On Hopper GPUs (H100/H200), BF16 or FP16 GEMM kernels long enough to be compute-bound
    (>= 50 µs each) that take a large share of the step.

    Why it is slow
    --------------
    Hopper's tensor cores do FP8 at twice the BF16 rate. Large GEMMs are bound by that rate, so
    running them in FP8 (with per-tensor scaling) nearly halves their time; the casts and amax
    reductions FP8 adds are memory-bound kernels that cost a fraction of a large GEMM.

    Evidence
    --------
    The large 16-bit GEMMs per step, their time and share of the step.

    Example
    -------
    ```python
    with torch.autocast("cuda", dtype=torch.bfloat16):
        y = mlp(x)                         # BF16 GEMMs dominate the step
    ```

    Use instead
    -----------
    ```python
    import transformer_engine.pytorch as te
    from transformer_engine.common.recipe import DelayedScaling, Format
    mlp = te.LayerNormMLP(hidden, ffn)       # te.Linear for plain linears
    with te.fp8_autocast(enabled=True, fp8_recipe=DelayedScaling(fp8_format=Format.HYBRID)):
        y = mlp(x)
    # without TE: torch._scaled_mm(a_fp8, b_fp8, scale_a, scale_b, out_dtype=torch.bfloat16)
    ```

    Speedup model
    -------------
    Replay of the analysed steps with each large 16-bit GEMM taking 0.62 of its time: FP8 GEMM
    plus its cast and amax kernels over BF16 GEMM time, measured on H100 with
    ``torch._scaled_mm`` (`advisor.engine.hardware`). Bounds: 0.8 (casts unfused) and 0.5 (the
    2x peak).

    Known false positives
    ---------------------
    Layers whose accuracy suffers in FP8 (first/last layers, small heads) are usually kept in
    BF16; the estimate counts every large GEMM.

    References
    ----------
    NVIDIA Transformer Engine documentation (FP8 primer); NVIDIA H100 Tensor Core GPU
    architecture whitepaper (FP8: 2x BF16 throughput).
    """

    code = "PREC002"
    name = "fp8-candidate"
    category = Category.PRECISION
    status = Status.STABLE  # validated on its H100 scenario: docs/validation.md

    def check(self, graph: OpGraph, ctx: RuleContext) -> Iterable[Finding]:
        if not is_hopper(graph):
            return
        steps = ctx.steps
        gemms = [o for o in steps_ops(graph, steps) if o.kind is GpuOpKind.KERNEL
                 and classify(o) is KernelCategory.GEMM and op_precision(graph, o) == "fp16/bf16"
                 and o.duration_ns >= FP8_MIN_GEMM_NS]
        if not gemms:
            return
        total = sum(o.duration_ns for o in gemms)
        share = op_share(gemms, steps)

        def scaled(factor: float) -> SetOpDurations:
            return SetOpDurations(tuple((o.id, int(o.duration_ns * factor)) for o in gemms))

        names = Counter(short_name(o.name) for o in gemms)
        yield ctx.finding(
            type(self),
            message=(f"{len(gemms) / len(steps):.0f} large 16-bit GEMMs per step take "
                     f"{per_step(total, steps) / 1e6:.2f} ms ({share:.0%} of the step): FP8 candidates"),
            evidence=Evidence(
                steps=tuple(s.index for s in steps),
                kernels=tuple(k for k, _ in names.most_common(5)),
                node_ids=tuple(f"gpu:{o.id}" for o in gemms[:50]),
                quantities={"large_gemms_per_step": len(gemms) / len(steps),
                            "large_gemm_ns_per_step": per_step(total, steps), "large_gemm_share": share},
            ),
            fix=Fix(
                title="Run the large GEMMs in FP8 with Transformer Engine",
                snippet=("import transformer_engine.pytorch as te\n"
                         "layer = te.Linear(in_features, out_features)\n"
                         "with te.fp8_autocast(enabled=True):\n    y = layer(x)"),
            ),
            effects=[scaled(BF16_TO_FP8_GEMM_FACTOR)],
            low_effects=[scaled(FP8_FACTOR_LOW)],
            high_effects=[scaled(FP8_FACTOR_HIGH)],
            model="replay with large 16-bit GEMMs at the measured FP8 time including casts",
            assumptions=(f"FP8 GEMM + casts = {BF16_TO_FP8_GEMM_FACTOR:g} of the BF16 GEMM time",
                         "accuracy holds with per-tensor delayed scaling"),
            confidence=Confidence.MODELED,
        )
