"""fp32-matmul: GEMMs and convolutions run in FP32 on CUDA cores, leaving tensor cores idle."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from advisor.engine.context import RuleContext
from advisor.engine.effects import SetOpDurations
from advisor.engine.hardware import FP32_TO_BF16_GEMM_SPEEDUP, FP32_TO_TF32_GEMM_SPEEDUP, MIN_KERNEL_NS
from advisor.engine.rule import Category, Confidence, Evidence, Finding, Fix, Rule, Status
from advisor.graph.kernels import KernelCategory, classify, op_precision, short_name
from advisor.graph.model import GpuOpKind, OpGraph
from advisor.graph.queries import op_share, per_step, steps_ops


class Fp32Matmul(Rule):
    """Matrix multiplies run in full FP32 without tensor cores (no AMP, TF32 off).

    What it detects
    ---------------
    GEMM and convolution kernels whose names say FP32 arithmetic on CUDA cores (``sgemm``,
    ``f32f32_f32``, SIMT CUTLASS kernels) rather than TF32, BF16/FP16 or FP8 tensor-core kernels.

    Why it is slow
    --------------
    H100 SXM does 67 TFLOP/s in FP32 on CUDA cores, against about 495 (TF32) and 990 (BF16)
    dense on tensor cores. PyTorch keeps ``torch.backends.cuda.matmul.allow_tf32 = False`` by
    default, so a model trained without autocast runs every matmul at the slowest rate.

    Evidence
    --------
    The FP32 GEMM kernels per step, their time and share of the step.

    Example
    -------
    ```python
    model = Model().cuda()                  # FP32 weights, no autocast
    loss = loss_fn(model(x), y)
    ```

    Use instead
    -----------
    ```python
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = loss_fn(model(x), y)
    # at least: torch.backends.cuda.matmul.allow_tf32 = True; torch.backends.cudnn.allow_tf32 = True
    ```

    Speedup model
    -------------
    Replay of the analysed steps with each FP32 GEMM taking its time divided by the FP32 -> BF16
    tensor-core ratio measured on H100 (`advisor.engine.hardware`), never below the shortest
    kernel time. Elementwise kernels are left as they are (autocast halves some of their traffic:
    the estimate is conservative there). Low bound: TF32 instead of BF16.

    Known false positives
    ---------------------
    FP32 GEMMs that must stay FP32 for accuracy (some losses, small heads) are matched too;
    autocast keeps those in FP32 by itself.

    References
    ----------
    PyTorch AMP documentation; NVIDIA H100 Tensor Core GPU datasheet; PyTorch "TF32 on Ampere".
    """

    code = "PREC001"
    name = "fp32-matmul"
    category = Category.PRECISION
    status = Status.STABLE  # validated on its H100 scenario: docs/validation.md

    def check(self, graph: OpGraph, ctx: RuleContext) -> Iterable[Finding]:
        steps = ctx.steps
        gemms = [o for o in steps_ops(graph, steps) if o.kind is GpuOpKind.KERNEL
                 and classify(o) in (KernelCategory.GEMM, KernelCategory.CONV)
                 and op_precision(graph, o) == "fp32"]
        if not gemms:
            return
        total = sum(o.duration_ns for o in gemms)
        share = op_share(gemms, steps)

        def scaled(factor: float) -> SetOpDurations:
            return SetOpDurations(tuple((o.id, max(min(o.duration_ns, MIN_KERNEL_NS),
                                                   int(o.duration_ns / factor))) for o in gemms))

        names = Counter(short_name(o.name) for o in gemms)
        yield ctx.finding(
            type(self),
            message=(f"{len(gemms) / len(steps):.0f} FP32 GEMM/conv kernels per step without tensor "
                     f"cores take {per_step(total, steps) / 1e6:.2f} ms ({share:.0%} of the step)"),
            evidence=Evidence(
                steps=tuple(s.index for s in steps),
                kernels=tuple(k for k, _ in names.most_common(5)),
                node_ids=tuple(f"gpu:{o.id}" for o in gemms[:50]),
                quantities={"fp32_gemms_per_step": len(gemms) / len(steps),
                            "fp32_gemm_ns_per_step": per_step(total, steps), "fp32_gemm_share": share},
            ),
            fix=Fix(
                title="Train with bf16 autocast (or at least enable TF32)",
                snippet=("with torch.autocast('cuda', dtype=torch.bfloat16):\n"
                         "    loss = loss_fn(model(x), y)\n"
                         "# minimum: torch.backends.cuda.matmul.allow_tf32 = True"),
            ),
            effects=[scaled(FP32_TO_BF16_GEMM_SPEEDUP)],
            low_effects=[scaled(FP32_TO_TF32_GEMM_SPEEDUP)],
            model="replay with FP32 GEMMs at the measured BF16 tensor-core rate",
            assumptions=(f"a BF16 GEMM is {FP32_TO_BF16_GEMM_SPEEDUP:g}x faster than FP32 on H100",
                         "elementwise kernels unchanged"),
            confidence=Confidence.MODELED,
        )
