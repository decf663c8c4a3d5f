"""fp32-matmul: GEMMs and convolutions run in FP32 on CUDA cores, leaving tensor cores idle."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import ClassVar

from advisor.engine.context import RuleContext
from advisor.engine.effects import AddDispatches, DropOps, SetOpDurations
from advisor.engine.gpus import lookup, trace_gpu
from advisor.engine.hardware import MIN_KERNEL_NS
from advisor.engine.rule import (
    Category,
    Confidence,
    Evidence,
    Finding,
    FixVariant,
    Requirement,
    Rule,
    Status,
    Validation,
)
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
BATCH_NORM = re.compile(r"(?:^|[^a-z])bn_(?:fw|bw)|batch_?norm", re.I)
"""BatchNorm kernels (cuDNN's ``bn_fw_tr_1C11_*``/``bn_bw_1C11_*``, ATen's ``batch_norm_*``).
Autocast's FP32 list has layer_norm and group_norm but not batch_norm: cuDNN's batch norm takes
16-bit activations with FP32 statistics and writes 16 bits, so it keeps what autocast's
16-bit ops keep (half the bytes), not a normalization's FP32 time and cast."""
_FP32_ATTENTION = re.compile(r"f32|float(?!16)|fp32", re.I)
AUXILIARY = re.compile(r"init_device_workspace|reduce_wgrad|splitKreduce|ReduceSplitK"
                        r"|kern_precompute_indices", re.I)
"""Kernels cuDNN and cuBLAS run beside a convolution or GEMM that are not one: clearing the
workspace, precomputing indices, summing split-K partial products. They move FP32 accumulators,
which stay FP32 under autocast, and have no tensor-core rate to gain: they keep their time
(measured: Lightning's ViT-B/16 patch embedding, H100, ``ReduceSplitK`` 5 us in FP32 and 6 us
under bf16-mixed, fixtures/public/lightning-vit-b)."""
CASTS_PER_GEMM_KERNEL = 2 / 3
"""Eager operators autocast adds per FP32 GEMM or convolution kernel: a layer's weight runs in
three kernels a step (forward, data gradient, weight gradient) and autocast casts it to 16 bits
once in the forward and casts its gradient back once in the backward, two operators, each a
dispatch and a launch on the host. A lower bound: a bias is cast too, and an input that comes
from an FP32 op (a LayerNorm) is cast before its GEMM. Measured on the H100 (Lightning ViT-B/16,
32-true against bf16-mixed, fixtures/public/lightning-vit-b): 832 -> 988 kernels a step, 156 more
for 165 GEMM and convolution kernels (0.95 each); HF GPT-2 (fixtures/public/hf-gpt2): 319 more
for 159 (2.0 each, its FP32 softmax and loss add upcasts). The host time they take is what a
host-bound step gains less: timm's ResNet-50 and Lightning's ViT-B run host-bound in bf16."""


class Fp32Matmul(Rule):
    """Matrix multiplies run in FP32 without autocast: tensor cores idle, or at half rate in TF32.

    What it detects
    ---------------
    GEMM and convolution kernels whose names say FP32 arithmetic on CUDA cores (``sgemm``,
    ``f32f32_f32f32_f32``, SIMT CUTLASS kernels), and those that multiply FP32 data in TF32
    (``f32f32_tf32f32_f32``, ``s1688gemm``: cuDNN's convolutions by PyTorch's default), rather
    than BF16/FP16 or FP8 tensor-core kernels. The mechanism is named by where more of the time is.

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
    (`advisor.engine.gpus`: measured on the H100, datasheet elsewhere), each TF32 one by the
    TF32 -> 16-bit ratio (2.0 on the H100), never below the shortest kernel time; cuDNN's and
    cuBLAS's workspace and split-K kernels keep theirs. The eager memory-bound kernels next to
    them keep what their bytes keep (`AUTOCAST_KEEP`: half for autocast's 16-bit ops and batch
    norm, all of it plus a cast for layer and group norms, which stay FP32). Autocast's casts
    (a weight's, and its gradient's in the backward) add host work: `CASTS_PER_GEMM_KERNEL`
    operators per GEMM/conv kernel at this trace's own host time per operator, which is what a
    step that turns host-bound in 16 bits gains less. Low bound: TF32 where the GPU has it
    (else the non-tensor 16-bit rate, 2x on Volta and Turing: GEMMs and convolution transforms
    that miss the tensor cores) for the FP32 kernels, 16-bit ops reading one FP32 input and softmax
    behind an upcast; high: every 16-bit op pure 16-bit.

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
    requires = (Requirement.STEPS, Requirement.GPU_WORK, Requirement.KNOWN_GPU)
    """A named GPU outside advisor's table is skipped: the model is a ratio of its rates."""
    validation = Validation(  # fixtures/scenarios-check
        {"tokens": 8192, "d": 1024, "ff": 4096, "depth": 4},
        measured=6.66, runs=3)
    category = Category.PRECISION
    gate_signals = ("fp32-gemms",)
    status = Status.STABLE  # validated on its H100 scenario: docs/validation.md
    mechanisms: ClassVar[Mapping[str, str]] = {
        "fp32-gemms": "GEMMs and convolutions run in FP32 on CUDA cores on a GPU with BF16 and "
                      "TF32 tensor cores (no autocast, TF32 off: PyTorch's default for matmuls)",
        "fp32-gemms-no-bf16": "GEMMs and convolutions run in FP32 on a GPU whose tensor cores "
                              "take FP16 only (V100, T4: no BF16, no TF32)",
        "tf32-gemms": "GEMMs and convolutions run in TF32 on tensor cores, at half their 16-bit "
                      "rate, with FP32 activations around them (no autocast; TF32 on: PyTorch's "
                      "default for cuDNN convolutions)",
    }
    knobs: ClassVar[Mapping[str, tuple[str, ...]]] = {"fp32-gemms": ("bf16", "tf32"),
                                                      "tf32-gemms": ("bf16",)}
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
            "tf32-gemms",
            "Train with bf16 autocast: TF32 GEMMs and convolutions run at half the bf16 rate",
            "with torch.autocast(\"cuda\", dtype=torch.bfloat16):\n"
            "    loss = loss_fn(model(x), y)\n"
            "loss.backward(); opt.step()\n"
            "# convolutions: model = model.to(memory_format=torch.channels_last)"),
        FixVariant(
            "tf32-gemms",
            "Train in bf16: TrainingArguments(bf16=True) (TF32 GEMMs run at half the bf16 rate)",
            "args = TrainingArguments(..., bf16=True)     # --bf16 on the command line",
            framework="hf-trainer", kind="config"),
        FixVariant(
            "tf32-gemms",
            "Train in bf16: Trainer(precision=\"bf16-mixed\") (TF32 GEMMs run at half the bf16 "
            "rate)",
            "trainer = Trainer(..., precision=\"bf16-mixed\")   # --trainer.precision bf16-mixed",
            framework="lightning", kind="config"),
        FixVariant(
            "tf32-gemms",
            "Train in bf16: Accelerator(mixed_precision=\"bf16\") (TF32 GEMMs run at half the "
            "bf16 rate)",
            "accelerator = Accelerator(mixed_precision=\"bf16\")   # or: accelerate launch "
            "--mixed_precision bf16",
            framework="accelerate", kind="config"),
        FixVariant(
            "tf32-gemms",
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
        matmuls = [o for o in ops if classify(o) in (KernelCategory.GEMM, KernelCategory.CONV)
                   and not AUXILIARY.search(o.name)]
        precision = {o.id: op_precision(graph, o) for o in matmuls}
        gemms = [o for o in matmuls if precision[o.id] == "fp32"]
        tf32 = [o for o in matmuls if precision[o.id] == "tf32"]
        gpu = trace_gpu(graph, (o.name for o in (gemms + tf32)[:200]))
        # a trace that names no GPU (and whose kernels do not say) is read as the H100 advisor
        # is built for, and says so; one naming a GPU outside the table is skipped (KNOWN_GPU)
        assumed = gpu is None
        gpu = gpu or DEFAULT_GPU
        if gpu is None or not (gemms or (tf32 and gpu.tf32_to_16bit and gpu.bf16)):
            return
        if not gpu.tf32_to_16bit:
            tf32 = []
        attention = [o for o in ops if classify(o) is KernelCategory.ATTENTION
                     and _FP32_ATTENTION.search(o.name)]
        # autocast changes the memory-bound kernels around the FP32 matmuls (a model that already
        # runs in 16 bits with a stray FP32 GEMM keeps its other kernels as they are)
        fp32_ids = {o.id for o in gemms + tf32 + attention}
        chains = find_chains(graph, steps).next_to(fp32_ids)
        total = sum(o.duration_ns for o in gemms)
        tf32_ns = sum(o.duration_ns for o in tf32)
        share = op_share(gemms + tf32, steps)
        ratio = gpu.fp32_to_16bit
        # the low bound: TF32 where the GPU has it (the fix's lighter form); without TF32
        # (Volta, Turing) the GEMMs that miss the tensor cores' alignment or layout (winograd
        # and layout transforms around FP16 convolutions) gain only the non-tensor 16-bit rate,
        # so the band reaches down to that, not to the tensor-core peak
        low_ratio = gpu.fp32_to_tf32 or min(ratio, gpu.half_simt_ratio)
        tf32_ratio = gpu.tf32_to_16bit or 1.0
        unaligned, sizes_known = unaligned_gemms(graph, gemms + tf32)
        simt = min(gpu.half_simt_ratio, ratio)
        in_tf32 = {o.id for o in tf32}
        launches = tuple(sorted({c.id for o in gemms + tf32
                                 if (c := graph.launcher(o)) is not None}))

        def effects(factor: float, bound: int) -> list:
            def speedup(o: GpuOp) -> float:
                f = tf32_ratio if o.id in in_tf32 else factor
                return min(f, simt) if o.id in unaligned else f
            return [SetOpDurations(tuple(
                (o.id, max(min(o.duration_ns, MIN_KERNEL_NS), int(o.duration_ns / speedup(o))))
                for o in gemms + tf32 + attention)),
                *autocast_memory_effects(chains, bound),
                *([AddDispatches(launches, CASTS_PER_GEMM_KERNEL)] if launches else [])]
        unaligned_ns = sum(o.duration_ns for o in gemms + tf32 if o.id in unaligned)

        names = Counter(short_name(o.name) for o in gemms + tf32)
        half = gpu.half_dtype
        n = len(steps)
        parts = []
        if gemms:
            parts.append(f"{len(gemms) / n:.0f} FP32 GEMM/conv kernels per step without tensor "
                         f"cores take {per_step(total, steps) / 1e6:.2f} ms")
        if tf32:
            # said in full when it opens the message (no FP32 kernels before it)
            what = "in TF32" if gemms else "GEMM/conv kernels per step in TF32"
            parts.append(f"{len(tf32) / n:.0f} {what} (half the {half} tensor-core rate) take "
                         f"{per_step(tf32_ns, steps) / 1e6:.2f} ms")
        # named by where most of the time is: cuDNN runs a few FP32 convolutions among TF32 ones
        fp32_first = total >= tf32_ns
        mechanism = ("fp32-gemms" if gpu.bf16 else "fp32-gemms-no-bf16") if fp32_first \
            else "tf32-gemms"
        rates = []
        if gemms:
            rates.append(f"a {half} GEMM is {ratio:.1f}x faster than FP32 on the {gpu.name}")
        if tf32:
            rates.append(f"a {half} GEMM or convolution is {tf32_ratio:.1f}x faster than TF32 on "
                         f"the {gpu.name}; cuDNN's workspace and split-K kernels keep their time")
        yield ctx.finding(
            type(self),
            message=(f"{'; '.join(parts)} ({share:.0%} of the step) on the {gpu.name}"
                     + (" (assumed: the trace names no GPU)" if assumed else "")),
            evidence=Evidence(
                steps=tuple(s.index for s in steps),
                kernels=tuple(k for k, _ in names.most_common(5)),
                node_ids=tuple(f"gpu:{o.id}" for o in (gemms + tf32)[:50]),
                quantities={"fp32_gemms_per_step": len(gemms) / n,
                            "fp32_gemm_ns_per_step": per_step(total, steps),
                            "tf32_gemms_per_step": len(tf32) / n,
                            "tf32_gemm_ns_per_step": per_step(tf32_ns, steps),
                            "fp32_gemm_share": op_share(gemms, steps),
                            "tf32_gemm_share": op_share(tf32, steps),
                            "fp32_attention_ns_per_step":
                                per_step(sum(o.duration_ns for o in attention), steps),
                            "fp32_to_16bit_ratio": ratio, "tf32_to_16bit_ratio": tf32_ratio,
                            "unaligned_gemm_ns_per_step": per_step(unaligned_ns, steps),
                            "autocast_casts_per_step":
                                CASTS_PER_GEMM_KERNEL * len(launches) / n},
            ),
            mechanism=mechanism,
            params={"gpu": gpu.name},
            effects=effects(ratio, 0),
            low_effects=effects(low_ratio, 1),
            high_effects=effects(ratio, 2),
            model=(f"replay with FP32 and TF32 GEMMs and attention at the {gpu.name}'s {half} "
                   "tensor-core rate, the memory-bound kernels as autocast leaves them and "
                   "autocast's casts on the host"),
            assumptions=(*((f"the trace names no GPU: an {gpu.name}'s rates are assumed",)
                           if assumed else ()),
                         *rates,
                         (f"GEMMs with a size that is not a multiple of {TENSOR_CORE_MULTIPLE} "
                          f"({per_step(unaligned_ns, steps) / 1e6:.2f} ms per step here) run on "
                          f"low-alignment kernels: {simt:.1f}x" if sizes_known else
                          "GEMM sizes are not in the trace (no operator shapes): every GEMM is "
                          f"taken to be tensor-core eligible (sizes multiples of "
                          f"{TENSOR_CORE_MULTIPLE}); one that is not gains {simt:.1f}x, not "
                          f"{ratio:.1f}x"),
                         "memory-bound kernels move 16-bit data under autocast (half the bytes) "
                         "except layer and group norms and softmax, which stay FP32 and add casts",
                         f"autocast adds {CASTS_PER_GEMM_KERNEL:.2f} cast operators per GEMM/conv "
                         "kernel on the host (a weight's cast and its gradient's), each taking "
                         "this trace's host time per operator",
                         "compiler-fusion, where raised, fuses the same kernels: replayed together"),
            confidence=Confidence.MODELED,
        )


def chain_keep(chain: Sequence[GpuOp], bound: int = 0) -> float:
    """The time-weighted share of its time a memory-bound chain keeps under autocast
    (`AUTOCAST_KEEP`; ``bound`` 0 nominal, 1 slowest, 2 fastest), at most 1."""
    total = sum(o.duration_ns for o in chain)
    if total <= 0:
        return 1.0
    kept = sum(o.duration_ns * autocast_keep(o)[bound] for o in chain)
    return min(1.0, kept / total)


def autocast_keep(op: GpuOp) -> tuple[float, float, float]:
    """`AUTOCAST_KEEP` of one kernel; a batch norm keeps what the 16-bit ops keep
    (`BATCH_NORM`)."""
    cat = classify(op)
    if cat is KernelCategory.NORM and BATCH_NORM.search(op.name):
        cat = KernelCategory.ELEMENTWISE
    return AUTOCAST_KEEP.get(cat, (1.0, 1.0, 1.0))


def autocast_memory_effects(chains: Iterable[Sequence[GpuOp]], bound: int = 0) -> list[DropOps]:
    """One `DropOps` per distinct keep (to the percent) over the chains' kernels."""
    by_keep: dict[float, list[int]] = {}
    for c in chains:
        by_keep.setdefault(round(chain_keep(c, bound), 2), []).extend(o.id for o in c)
    return [DropOps(tuple(ids), keep) for keep, ids in sorted(by_keep.items())]
