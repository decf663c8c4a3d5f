"""fp32-matmul: GEMMs and convolutions run in FP32 on CUDA cores, leaving tensor cores idle."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import ClassVar

from advisor.engine.context import RuleContext
from advisor.engine.effects import DropOps, SetOpDurations
from advisor.engine.gpus import lookup, trace_gpu
from advisor.engine.hardware import MIN_KERNEL_NS
from advisor.engine.rule import Category, Confidence, Evidence, Finding, FixVariant, Rule, Status, Validation
from advisor.graph.chains import find_chains
from advisor.graph.gemm_shapes import candidate_sizes
from advisor.graph.kernels import KernelCategory, classify, op_precision, short_name
from advisor.graph.model import GpuOp, GpuOpKind, OpGraph
from advisor.graph.queries import op_share, per_step, steps_ops

TENSOR_CORE_MULTIPLE = 8
"""cuBLAS's fast 16-bit tensor-core kernels need M, N and K to be multiples of 8 (16 bytes); a
size such as GPT-2's 50,257-token vocabulary sends its GEMMs to low-alignment kernels that run at
a fraction of the tensor-core rate. Measured on the H100 (HF run_clm.py, GPT-2): the three
vocabulary GEMMs per step took 36.6 ms in FP32 and 15.4 ms in bf16 (CUTLASS
`Kernel2<cutlass_75_tensorop...>`, about 123 TFLOP/s): 2.4x, while the step's aligned GEMMs ran
in Hopper kernels (`nvjet_*`) many times faster. Such a GEMM gets `GpuSpec.half_simt_ratio`."""


def unaligned_gemms(graph: OpGraph, gemms: Sequence[GpuOp]) -> tuple[set[int], bool]:
    """Kernels of GEMM operators with a size that is not a multiple of `TENSOR_CORE_MULTIPLE`,
    and whether any GEMM's sizes were known (operator shapes in the trace, or its shape probe:
    `advisor.graph.gemm_shapes`). A kernel whose candidate sizes disagree counts as aligned."""
    out, known = set(), False
    for o in gemms:
        sizes = candidate_sizes(graph, o)
        if not sizes:
            continue
        known = True
        if all(any(d % TENSOR_CORE_MULTIPLE for d in s) for s in sizes):
            out.add(o.id)
    return out, known


DEFAULT_GPU = lookup("H100")
"""Traces that name no GPU and carry no architecture tag are read as the H100 advisor targets."""

AUTOCAST_KEEP: dict[KernelCategory, tuple[float, float, float]] = {
    # category: (nominal, low bound = slowest, high bound = fastest), time kept under autocast
    KernelCategory.ELEMENTWISE: (0.5, 0.83, 0.5),
    KernelCategory.RNG: (0.5, 0.83, 0.5),
    KernelCategory.REDUCTION: (0.5, 0.83, 0.5),
    KernelCategory.OTHER: (0.5, 0.83, 0.5),
    KernelCategory.NORM: (1.75, 1.75, 1.0),
    KernelCategory.SOFTMAX: (1.0, 1.75, 0.75),
}
"""Time an eager memory-bound kernel next to the FP32 matmuls keeps once autocast runs them in
16 bits, from the bytes it moves (these kernels run at memory bandwidth in both precisions).
Autocast's "promote" ops (adds, GELU, dropout, copies, bias-gradient sums) take the dtype of their
inputs: GEMM outputs and their gradients are 16-bit, so they move 2 bytes an element instead of
4 (0.5); one FP32 input among 16-bit ones (the residual stream of a pre-norm transformer) makes it
read 4 + 2 and write 4 (10 of 12 bytes: 0.83). Normalizations run in FP32 (autocast's FP32 list)
and their output is cast to 16 bits for the next GEMM, a kernel reading 4 and writing 2 bytes an
element against the normalization's 8 (+0.75); the backward casts the gradient back. Softmax and
log-softmax run with an FP32 output from 16-bit input (2 + 4 of 8 bytes: 0.75) or, where the
model upcasts first (``logits.float()``, as HF's causal-LM loss does), FP32 plus that cast (1.75).
A chain keeps the time-weighted mean of its kernels, at most all of it. Checked against real bf16
steps, not fitted: timm ViT-B/16 under bf16 autocast spends 25.7 ms per 128 images in eager
memory-bound kernels, torchvision's ViT-B/16 in FP32 51.6 ms (Lightning, batch 64, doubled): 0.50."""
_FP32_ATTENTION = re.compile(r"f32|float(?!16)|fp32", re.I)


class Fp32Matmul(Rule):
    """Matrix multiplies run in full FP32 without tensor cores (no AMP, TF32 off).

    What it detects
    ---------------
    GEMM and convolution kernels whose names say FP32 arithmetic on CUDA cores (``sgemm``,
    ``f32f32_f32``, SIMT CUTLASS kernels) rather than TF32, BF16/FP16 or FP8 tensor-core kernels.

    Why it is slow
    --------------
    H100 SXM does 67 TFLOP/s in FP32 on CUDA cores, against about 495 (TF32) and 990 (BF16)
    dense on tensor cores (A100: 19.5 / 156 / 312; V100: 15.7 FP32 against 125 FP16, no BF16 or
    TF32). PyTorch keeps ``torch.backends.cuda.matmul.allow_tf32 = False`` by default, so a
    model trained without autocast runs every matmul at the slowest rate.

    Evidence
    --------
    The FP32 GEMM kernels per step, their time and share of the step.

    Example
    -------
    ```python
    model = Model().cuda()                  # FP32 weights, no autocast
    loss = loss_fn(model(x), y)
    ```

    Speedup model
    -------------
    Replay of the analysed steps with what autocast changes: each FP32 GEMM and FP32 attention
    kernel takes its time divided by the trace's GPU's FP32 -> 16-bit tensor-core ratio
    (`advisor.engine.gpus`: measured on the H100, datasheet elsewhere), never below the shortest
    kernel time; the eager memory-bound kernels next to them keep what their bytes keep
    (`AUTOCAST_KEEP`: half for autocast's 16-bit ops, all of it plus a cast for normalizations,
    which stay FP32). Low bound: TF32 where the GPU has it (else the 16-bit ratio), 16-bit ops
    reading one FP32 input and softmax behind an upcast; high: every 16-bit op pure 16-bit.

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
    validation = Validation(  # fixtures/scenarios-check
        {"tokens": 8192, "d": 1024, "ff": 4096, "depth": 4},
        measured=6.75)
    category = Category.PRECISION
    gate_signals = ("fp32-gemms",)
    status = Status.STABLE  # validated on its H100 scenario: docs/validation.md
    mechanisms: ClassVar[Mapping[str, str]] = {
        "fp32-gemms": "GEMMs and convolutions run in FP32 on CUDA cores on a GPU with BF16 and "
                      "TF32 tensor cores (no autocast, TF32 off: PyTorch's default for matmuls)",
        "fp32-gemms-no-bf16": "GEMMs and convolutions run in FP32 on a GPU whose tensor cores "
                              "take FP16 only (V100, T4: no BF16, no TF32)",
    }
    knobs: ClassVar[Mapping[str, tuple[str, ...]]] = {"fp32-gemms": ("bf16", "tf32")}
    fixes: ClassVar[tuple[FixVariant, ...]] = (
        FixVariant(
            "fp32-gemms",
            "Train with bf16 autocast: FP32 GEMMs leave the tensor cores idle (or at least enable TF32)",
            "with torch.autocast(\"cuda\", dtype=torch.bfloat16):\n"
            "    loss = loss_fn(model(x), y)\n"
            "loss.backward(); opt.step()\n"
            "# at least: torch.backends.cuda.matmul.allow_tf32 = True\n"
            "#           torch.backends.cudnn.allow_tf32 = True"),
        FixVariant(
            "fp32-gemms",
            "Train in bf16: TrainingArguments(bf16=True) (FP32 GEMMs leave the tensor cores idle)",
            "args = TrainingArguments(..., bf16=True)     # --bf16 on the command line\n"
            "# what stays in FP32 then: tf32=True (Ampere and later)",
            framework="hf-trainer", kind="config"),
        FixVariant(
            "fp32-gemms",
            "Train in bf16: Trainer(precision=\"bf16-mixed\") (FP32 GEMMs leave the tensor cores "
            "idle)",
            "trainer = Trainer(..., precision=\"bf16-mixed\")   # --trainer.precision bf16-mixed\n"
            "# what stays in FP32 then: torch.set_float32_matmul_precision(\"high\") (TF32)",
            framework="lightning", kind="config"),
        FixVariant(
            "fp32-gemms",
            "Train in bf16: Accelerator(mixed_precision=\"bf16\") (FP32 GEMMs leave the tensor "
            "cores idle)",
            "accelerator = Accelerator(mixed_precision=\"bf16\")   # or: accelerate launch "
            "--mixed_precision bf16\n"
            "torch.backends.cuda.matmul.allow_tf32 = True",
            framework="accelerate", kind="config"),
        FixVariant(
            "fp32-gemms",
            "Train in bf16: \"bf16\": {\"enabled\": true} in the DeepSpeed config",
            "ds_config = {..., \"bf16\": {\"enabled\": True}}\n"
            "engine, opt, _, _ = deepspeed.initialize(model=model, config=ds_config, ...)",
            framework="deepspeed", kind="config"),
        FixVariant(
            "fp32-gemms-no-bf16",
            "Train with float16 autocast and a GradScaler (the $gpu has no bf16 or TF32)",
            "scaler = torch.amp.GradScaler(\"cuda\")\n"
            "with torch.autocast(\"cuda\", dtype=torch.float16):\n"
            "    loss = loss_fn(model(x), y)\n"
            "scaler.scale(loss).backward(); scaler.step(opt); scaler.update()"),
        FixVariant(
            "fp32-gemms-no-bf16",
            "Train in fp16: TrainingArguments(fp16=True) (the $gpu has no bf16 or TF32)",
            "args = TrainingArguments(..., fp16=True)   # loss scaling included",
            framework="hf-trainer", kind="config"),
        FixVariant(
            "fp32-gemms-no-bf16",
            "Train in fp16: Trainer(precision=\"16-mixed\") (the $gpu has no bf16 or TF32)",
            "trainer = Trainer(..., precision=\"16-mixed\")   # loss scaling included",
            framework="lightning", kind="config"),
        FixVariant(
            "fp32-gemms-no-bf16",
            "Train in fp16: Accelerator(mixed_precision=\"fp16\") (the $gpu has no bf16 or TF32)",
            "accelerator = Accelerator(mixed_precision=\"fp16\")   # loss scaling included",
            framework="accelerate", kind="config"),
    )

    def check(self, graph: OpGraph, ctx: RuleContext) -> Iterable[Finding]:
        steps = ctx.steps
        ops = [o for o in steps_ops(graph, steps) if o.kind is GpuOpKind.KERNEL]
        gemms = [o for o in ops if classify(o) in (KernelCategory.GEMM, KernelCategory.CONV)
                 and op_precision(graph, o) == "fp32"]
        if not gemms:
            return
        gpu = trace_gpu(graph, (o.name for o in gemms[:200])) or DEFAULT_GPU
        if gpu is None:
            return
        attention = [o for o in ops if classify(o) is KernelCategory.ATTENTION
                     and _FP32_ATTENTION.search(o.name)]
        # autocast changes the memory-bound kernels around the FP32 matmuls (a model that already
        # runs in 16 bits with a stray FP32 GEMM keeps its other kernels as they are)
        fp32_ids = {o.id for o in gemms + attention}
        chains = find_chains(graph, steps).next_to(fp32_ids)
        total = sum(o.duration_ns for o in gemms)
        share = op_share(gemms, steps)
        ratio = gpu.fp32_to_16bit
        low_ratio = gpu.fp32_to_tf32 or ratio
        unaligned, sizes_known = unaligned_gemms(graph, gemms)
        simt = min(gpu.half_simt_ratio, ratio)

        def effects(factor: float, bound: int) -> list:
            return [SetOpDurations(tuple(
                (o.id, max(min(o.duration_ns, MIN_KERNEL_NS),
                           int(o.duration_ns / (min(factor, simt) if o.id in unaligned
                                                else factor))))
                for o in gemms + attention)),
                *autocast_memory_effects(chains, bound)]
        unaligned_ns = sum(o.duration_ns for o in gemms if o.id in unaligned)

        names = Counter(short_name(o.name) for o in gemms)
        half = gpu.half_dtype
        yield ctx.finding(
            type(self),
            message=(f"{len(gemms) / len(steps):.0f} FP32 GEMM/conv kernels per step without tensor "
                     f"cores take {per_step(total, steps) / 1e6:.2f} ms ({share:.0%} of the step) on "
                     f"the {gpu.name}"),
            evidence=Evidence(
                steps=tuple(s.index for s in steps),
                kernels=tuple(k for k, _ in names.most_common(5)),
                node_ids=tuple(f"gpu:{o.id}" for o in gemms[:50]),
                quantities={"fp32_gemms_per_step": len(gemms) / len(steps),
                            "fp32_gemm_ns_per_step": per_step(total, steps), "fp32_gemm_share": share,
                            "fp32_attention_ns_per_step":
                                per_step(sum(o.duration_ns for o in attention), steps),
                            "fp32_to_16bit_ratio": ratio,
                            "unaligned_gemm_ns_per_step": per_step(unaligned_ns, steps)},
            ),
            mechanism="fp32-gemms" if gpu.bf16 else "fp32-gemms-no-bf16",
            params={"gpu": gpu.name},
            effects=effects(ratio, 0),
            low_effects=effects(low_ratio, 1),
            high_effects=effects(ratio, 2),
            model=(f"replay with FP32 GEMMs and attention at the {gpu.name}'s {half} tensor-core rate "
                   "and the memory-bound kernels as autocast leaves them"),
            assumptions=(f"a {half} GEMM is {ratio:.1f}x faster than FP32 on the {gpu.name}",
                         (f"GEMMs with a size that is not a multiple of {TENSOR_CORE_MULTIPLE} "
                          f"({per_step(unaligned_ns, steps) / 1e6:.2f} ms per step here) run on "
                          f"low-alignment kernels: {simt:.1f}x" if sizes_known else
                          "GEMM sizes are not in the trace (no operator shapes): every GEMM is "
                          f"taken to be tensor-core eligible (sizes multiples of "
                          f"{TENSOR_CORE_MULTIPLE}); one that is not gains {simt:.1f}x, not "
                          f"{ratio:.1f}x"),
                         "memory-bound kernels move 16-bit data under autocast (half the bytes) "
                         "except normalizations and softmax, which stay FP32 and add casts",
                         "compiler-fusion, where raised, fuses the same kernels: replayed together"),
            confidence=Confidence.MODELED,
        )


def chain_keep(chain: Sequence[GpuOp], bound: int = 0) -> float:
    """The time-weighted share of its time a memory-bound chain keeps under autocast
    (`AUTOCAST_KEEP`; ``bound`` 0 nominal, 1 slowest, 2 fastest), at most 1."""
    total = sum(o.duration_ns for o in chain)
    if total <= 0:
        return 1.0
    kept = sum(o.duration_ns * AUTOCAST_KEEP.get(classify(o), (1.0, 1.0, 1.0))[bound] for o in chain)
    return min(1.0, kept / total)


def autocast_memory_effects(chains: Iterable[Sequence[GpuOp]], bound: int = 0) -> list[DropOps]:
    """One `DropOps` per distinct keep (to the percent) over the chains' kernels."""
    by_keep: dict[float, list[int]] = {}
    for c in chains:
        by_keep.setdefault(round(chain_keep(c, bound), 2), []).extend(o.id for o in c)
    return [DropOps(tuple(ids), keep) for keep, ids in sorted(by_keep.items())]
