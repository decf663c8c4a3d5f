"""gemm-shape-alignment: tensor-core GEMMs with sizes that are not multiples of the tile."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import ClassVar

from advisor.engine.context import RuleContext
from advisor.engine.effects import SetOpDurations
from advisor.engine.efficiency import KernelEfficiency, kernel_efficiency
from advisor.engine.gpus import lookup
from advisor.engine.rule import (
    Category,
    Confidence,
    Evidence,
    Finding,
    FixVariant,
    Option,
    Requirement,
    Rule,
    Status,
    Validation,
)
from advisor.graph.model import OpGraph
from advisor.graph.queries import op_share, per_step, steps_ops

MULTIPLE = {"fp16/bf16": 8, "fp8": 16, "tf32": 4, "int8": 16}
"""Elements per 16 bytes: the alignment cuBLAS's tensor-core kernels need in each GEMM size
(NVIDIA, *Matrix Multiplication Background User's Guide*, "Tensor Core Requirements"). FP32
without TF32 runs on CUDA cores, where alignment does not pick the kernel (fp32-matmul's case)."""

PAD_TO = 64
"""The fix pads to a multiple of 64, which the same guide gives for best tile efficiency and
nanoGPT uses for its vocabulary (50257 -> 50304)."""


SIMILAR_SIZE = 20.0
"""How far apart in work per launch a reference GEMM may be. A vocabulary GEMM is the largest
of a language model's; the next are its MLP GEMMs, 16.4x smaller in GPT-2 (8192x768x3072 against
8192x768x50304), and both fill an H100: nanoGPT's ran at 665-772 and 717-837 TFLOP/s
(fixtures/public/nanogpt). Smaller GEMMs reach less, so a reference far smaller than the padded
GEMM makes the estimate conservative, never optimistic."""


def unaligned(k: KernelEfficiency) -> tuple[int, ...]:
    """The sizes (M, K, N) of a tensor-core GEMM that are not multiples of its datatype's tile.

    Sizes under `PAD_TO` are left out: a GEMM with N = 1 is a matrix-vector product and one with
    a few columns (a 4-way classifier) is narrow by design; padding them multiplies their work."""
    need = MULTIPLE.get(k.precision)
    if need is None or k.category != "gemm" or not k.sizes or len(k.sizes) != 4:
        return ()
    return tuple(d for d in k.sizes[1:] if d % need and d >= PAD_TO)


def padded_flops(k: KernelEfficiency) -> float:
    """FLOPs of the same launches at the padded sizes: 2 x batch x M' x K' x N' per launch."""
    need = MULTIPLE[k.precision]
    b, *mkn = k.sizes or (0, 0, 0, 0)
    m, kk, n = (d if d % need == 0 else -(-d // PAD_TO) * PAD_TO for d in mkn)
    return 2.0 * k.launches * b * m * kk * n


def references(k: KernelEfficiency, pool: Sequence[KernelEfficiency],
               similar: float) -> list[KernelEfficiency]:
    """Aligned GEMMs of the same datatype whose work per launch is within ``similar`` x of the
    padded GEMM's: what the padded GEMM would run like on this GPU, measured in this trace."""
    target = padded_flops(k) / max(k.launches, 1)
    out = []
    for r in pool:
        if r is k or r.precision != k.precision or r.category != "gemm" or unaligned(r):
            continue
        if not (r.flops and r.time_ns and r.sizes and len(r.sizes) == 4):
            continue
        per = r.flops / r.launches
        if target / similar <= per <= target * similar:
            out.append(r)
    return out


class GemmShapeAlignment(Rule):
    """Tensor-core GEMMs have sizes that are not multiples of the tile their datatype needs.

    What it detects
    ---------------
    BF16/FP16, FP8 and TF32 GEMMs (``mm``, ``addmm``, ``bmm``, ``linear`` and their backward
    GEMMs) whose M, K or N, read from the launching operator's recorded input shapes, is not a
    multiple of 8 (16-bit), 16 (FP8) or 4 (TF32) elements, and which run slower than the aligned
    GEMMs of similar size in the same trace.

    Why it is slow
    --------------
    cuBLAS's fast tensor-core kernels load operands 16 bytes at a time; a leading dimension that
    is not a multiple of 16 bytes sends the GEMM to low-alignment kernels (``cutlass::Kernel2``
    with 2- or 4-byte loads) or leaves whole tiles of the tensor cores partly empty. A vocabulary
    of 50,257 tokens makes GPT-2's three logits GEMMs per step such GEMMs.

    Evidence
    --------
    The unaligned GEMMs (operator, sizes, datatype), their time per step and achieved TFLOP/s,
    and the achieved TFLOP/s of the aligned GEMMs of similar size they are compared with.

    Example
    -------
    ```python
    model = GPT(GPTConfig(vocab_size=50257))   # lm_head: (B*T x 768) @ (768 x 50257)
    ```

    Speedup model
    -------------
    Each unaligned GEMM padded to multiples of 64 does the padded FLOPs at the achieved TFLOP/s
    of the aligned GEMMs of the same datatype in the same trace whose work per launch is within
    a factor ``similar-size`` of it (time-weighted; low bound the slowest of them, high bound the
    fastest). Its kernels are replayed with that time (never longer than now). Without such a
    reference GEMM there is no estimate and no finding.

    Known false positives
    ---------------------
    A size only the batch makes unaligned (the last, partial batch of an epoch) recurs rarely.
    Padding a vocabulary adds logits that must never be targets (they are not, if the tokenizer
    never emits them), and padded hidden sizes change the model.

    References
    ----------
    NVIDIA Deep Learning Performance Guide, *Matrix Multiplication Background* ("Tensor Core
    Requirements"); karpathy/nanoGPT ``model.py`` (vocab_size 50304, "padded up to nearest
    multiple of 64 for efficiency"); Hugging Face ``resize_token_embeddings(pad_to_multiple_of=...)``.
    """

    code = "KERN005"
    name = "gemm-shape-alignment"
    validation = Validation(  # fixtures/scenarios-check
        {"tokens": 4096, "d": 1024, "ff": 4096, "vocab": 32001},
        measured=1.74, runs=3)
    category = Category.KERNELS
    status = Status.PREVIEW
    requires = (Requirement.STEPS, Requirement.GPU_WORK, Requirement.LAUNCHES)
    options: ClassVar[Mapping[str, Option]] = {
        "similar-size": Option(SIMILAR_SIZE, "aligned GEMMs within this factor of the padded "
                                             "GEMM's work per launch are its reference efficiency"),
    }
    explained_by: ClassVar[Mapping[str, str]] = {
        "unfused-attention": "score GEMMs sized by the sequence length, gone in fused attention",
    }
    mechanisms: ClassVar[Mapping[str, str]] = {
        "unaligned-sizes": "GEMM sizes that are not multiples of the datatype's tensor-core tile",
    }
    fixes: ClassVar[tuple[FixVariant, ...]] = (
        FixVariant(
            "unaligned-sizes", "Pad $dims to a multiple of 64 (vocabulary, hidden size or batch)",
            "# nanoGPT: vocab_size 50257 -> 50304; extra logits are never targets\n"
            "vocab_size = (vocab_size + 63) // 64 * 64\n"
            "model = GPT(GPTConfig(vocab_size=vocab_size, ...))"),
        FixVariant(
            "unaligned-sizes", "Pad $dims to a multiple of 64: resize the token embeddings",
            "model.resize_token_embeddings(len(tokenizer), pad_to_multiple_of=64)",
            framework="hf-trainer"),
    )
    model = "replay with the unaligned GEMMs at the padded sizes' FLOPs and the achieved TFLOP/s " \
            "of the trace's aligned GEMMs of similar size"
    assumptions = ("a padded GEMM runs as fast as the aligned GEMMs of similar size and the same "
                   "datatype in this trace",
                   "the padding's extra rows or columns (logits never targeted) change no result")
    confidence = Confidence.MODELED

    def check(self, graph: OpGraph, ctx: RuleContext) -> Iterable[Finding]:
        steps = ctx.steps
        gpu = graph.info.gpus[0] if graph.info.gpus else None
        spec = lookup(gpu.name, gpu.compute_capability) if gpu else None
        ops = [o for o in steps_ops(graph, steps) if o.kind.value == "kernel"]
        pool = kernel_efficiency(graph, ops, spec)
        similar = float(self.option(ctx, "similar-size"))
        by_id = {o.id: o for o in ops}
        nominal, slow, fast, found = [], [], [], []
        for k in pool:
            if not unaligned(k) or not k.time_ns:
                continue
            refs = references(k, pool, similar)
            if not refs:
                continue
            work = padded_flops(k)
            rate = sum(r.flops or 0 for r in refs) / sum(r.time_ns for r in refs)  # FLOP/ns
            rates = [(r.flops or 0) / r.time_ns for r in refs]
            new = {name: work / x for name, x in (("nominal", rate), ("slow", min(rates)),
                                                 ("fast", max(rates)))}
            if new["nominal"] >= k.time_ns:
                continue  # already as fast as its aligned peers: padding would not pay
            found.append((k, refs, rate))
            for target, key in ((nominal, "nominal"), (slow, "slow"), (fast, "fast")):
                factor = min(1.0, new[key] / k.time_ns)
                target.extend((i, max(1, int(by_id[i].duration_ns * factor))) for i in k.op_ids)
        if not found:
            return
        kernels = [by_id[i] for k, _, _ in found for i in k.op_ids]
        total = sum(k.time_ns for k, _, _ in found)
        dims = sorted({d for k, _, _ in found for d in unaligned(k)})
        top, refs, rate = max(found, key=lambda x: x[0].time_ns)
        sizes = "x".join(str(d) for d in (top.sizes or ())[1:])
        yield ctx.finding(
            type(self),
            message=(f"{len(found)} GEMM shapes with sizes not multiples of the tensor-core "
                     f"tile ({', '.join(map(str, dims[:4]))}) take "
                     f"{per_step(total, steps) / 1e6:.2f} ms per step; {top.op} {sizes} runs at "
                     f"{top.tflops or 0:.0f} TFLOP/s against {rate / 1e3:.0f} for aligned "
                     f"GEMMs of its size"),
            evidence=Evidence(
                steps=tuple(s.index for s in steps),
                kernels=tuple(dict.fromkeys(k.kernel for k, _, _ in found))[:5],
                node_ids=tuple(f"gpu:{o.id}" for o in kernels[:50]),
                ranges=tuple(dict.fromkeys(k.op for k, _, _ in found)),
                quantities={"unaligned_gemm_ns_per_step": per_step(total, steps),
                            "unaligned_gemm_share": op_share(kernels, steps),
                            "unaligned_tflops": top.tflops or 0.0,
                            "aligned_reference_tflops": rate / 1e3,
                            "unaligned_shapes": len(found)}),
            mechanism="unaligned-sizes",
            params={"dims": ", ".join(str(d) for d in dims[:4])},
            effects=[SetOpDurations(tuple(nominal))],
            low_effects=[SetOpDurations(tuple(slow))],
            high_effects=[SetOpDurations(tuple(fast))],
        )
