"""unfused-attention: attention as matmul, softmax, matmul over the whole S x S matrix."""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import ClassVar

from advisor.engine.context import RuleContext
from advisor.engine.effects import DropOps, ScaleHostWork, SetOpDurations
from advisor.engine.hardware import FLASH_TO_UNFUSED_GEMM_FACTOR
from advisor.engine.rule import Category, Confidence, Evidence, Finding, FixVariant, Rule, Validation
from advisor.graph.kernels import (
    KernelCategory,
    base_name,
    classify,
    input_shapes,
    launching_op,
    short_name,
)
from advisor.graph.model import GpuOp, OpGraph
from advisor.graph.queries import per_step, steps_ops, stream_sequences

MAX_BETWEEN = 10
"""At most this many kernels (scale, mask, softmax, dropout, their casts and layout copies) sit
between the two matmuls of an unfused attention; more means the softmax belongs to something
else."""

KEEP_LOW = 0.25
"""Pessimistic share of the S x S elementwise time that a fused kernel still pays (its
softmax work on chip, without the memory round trips)."""

_BETWEEN_OK = {KernelCategory.SOFTMAX, KernelCategory.ELEMENTWISE, KernelCategory.RNG,
               KernelCategory.REDUCTION, KernelCategory.OTHER, KernelCategory.COPY,
               KernelCategory.MEMSET}


_LOSS_KERNEL = re.compile(r"nll_loss|ClassNLLCriterion|cross_entropy|crossentropy|log_?softmax"
                          r"|LogSoftMax", re.I)
"""A loss between the two GEMMs (log-softmax, NLL): a language model's head and its backward, not
attention."""
_LOSS_OP = re.compile(r"log_softmax|nll_loss|cross_entropy", re.I)
_SOFTMAX_WARP = re.compile(r"softmax_warp_(?:forward|backward)<([^>]*)>")


def _is_log_softmax(name: str) -> bool:
    """ATen's warp softmax takes ``is_log_softmax`` as its fifth template argument
    (``softmax_warp_forward<float, float, float, 10, true, false>`` is a log-softmax)."""
    if _LOSS_KERNEL.search(base_name(name)) or "LogSoftMax" in name:
        return True
    m = _SOFTMAX_WARP.search(name)
    if m:
        args = [a.strip() for a in m.group(1).split(",")]
        return len(args) > 4 and args[4] in ("true", "(bool)1", "1")
    return False


def _last2(shape: object) -> tuple[int, int] | None:
    if isinstance(shape, tuple) and len(shape) >= 2 and all(isinstance(d, int) for d in shape[-2:]):
        return shape[-2], shape[-1]
    return None


def _matrix_inputs(graph: OpGraph, op: GpuOp) -> list[tuple] | None:
    """The matrix operands (rank >= 2) of the operator that launched ``op``, where recorded."""
    r = launching_op(graph, op)
    shapes = input_shapes(r) if r is not None else None
    if not shapes:
        return None
    return [s for s in shapes if isinstance(s, tuple) and len(s) >= 2
            and all(isinstance(d, int) for d in s)]


def _is_attention(graph: OpGraph, first: GpuOp, middle: list[GpuOp], second: GpuOp) -> bool:
    """The mechanism's evidence: scores = Q K^T (a batched GEMM whose output is the score matrix),
    a softmax (not a log-softmax, no loss) over exactly that matrix, then a GEMM that consumes a
    matrix of that shape (P V forward; dS K / dS^T Q backward).

    Where the trace recorded operator shapes (Kineto ``record_shapes``, nsys ``--pytorch``
    ranges) all three must agree; without shapes, the names must show a plain softmax and no
    loss kernel or loss operator."""
    if any(_LOSS_KERNEL.search(o.name) or _is_log_softmax(o.name) for o in middle):
        return False
    softmaxes = [o for o in middle if classify(o) is KernelCategory.SOFTMAX]
    for o in softmaxes:
        r = launching_op(graph, o)
        if r is not None and _LOSS_OP.search(r.name):
            return False
    shapes = [input_shapes(r) for o in softmaxes if (r := launching_op(graph, o)) is not None]
    scores = [s[0] for s in shapes if s and isinstance(s[0], tuple)]
    if not scores:
        return True  # no shapes recorded: the names are all the evidence there is
    score = scores[0]
    if len(score) < 3 or _last2(score) is None:
        return False  # a 2-D softmax is over classes or tokens, not a (batch, heads) S x S
    s_q, s_k = _last2(score)
    a_in, b_in = _matrix_inputs(graph, first), _matrix_inputs(graph, second)
    if a_in is not None:
        if len(a_in) < 2 or max(len(x) for x in a_in) < 3:
            return False  # QK^T is batched over (batch, heads)
        a, b = a_in[-2], a_in[-1]
        if (a[-2], b[-1]) != (s_q, s_k) and (a[-2], b[-1]) != (s_k, s_q):
            return False
    return not (b_in is not None and not any(_last2(x) in ((s_q, s_k), (s_k, s_q)) for x in b_in))


def _between_launches(graph: OpGraph, blocks: list[tuple[GpuOp, list[GpuOp], GpuOp]]
                      ) -> tuple[tuple[int, int], ...]:
    """Per attention block, the host time from the end of the first matmul's launch to the
    start of the second's, on one thread: the Python and dispatch of the operators between
    them, which a fused attention operator replaces (issue #35: the settled replay of the fix
    was host-bound on them)."""
    out = []
    for first, _, second in blocks:
        a, b = graph.launcher(first), graph.launcher(second)
        if a is not None and b is not None and a.tid == b.tid and a.end_ns < b.start_ns:
            out.append((a.end_ns, b.start_ns))
    return tuple(out)


def _attention_blocks(graph: OpGraph, seq: list[GpuOp]) -> list[tuple[GpuOp, list[GpuOp], GpuOp]]:
    """(GEMM, the non-GEMM kernels containing a softmax or its backward, GEMM) on one stream,
    kept where `_is_attention` finds the QK^T -> softmax -> PV chain."""
    out = []
    gemm_at = [i for i, o in enumerate(seq) if classify(o) is KernelCategory.GEMM]
    for a, b in itertools.pairwise(gemm_at):
        middle = seq[a + 1 : b]
        if not middle or len(middle) > MAX_BETWEEN:
            continue
        cats = [classify(o) for o in middle]
        if KernelCategory.SOFTMAX in cats and all(c in _BETWEEN_OK for c in cats) \
                and _is_attention(graph, seq[a], middle, seq[b]):
            out.append((seq[a], middle, seq[b]))
    return out


class UnfusedAttention(Rule):
    """Attention is computed as matmul, softmax, matmul over a full sequence-by-sequence matrix.

    What it detects
    ---------------
    A softmax (forward or backward) sandwiched between two GEMMs with only elementwise work
    (scaling, masking, dropout, casts) between them, on the same stream: the signature of
    ``softmax(q @ k.T / sqrt(d) + mask) @ v`` written out, and of its backward. The chain must
    be attention's: a plain softmax (not a log-softmax), no loss kernel (NLL, cross-entropy) in
    between, and, where the trace recorded operator shapes, a batched first GEMM whose output is
    the softmax's (..., S_q, S_k) input and a second GEMM that consumes a matrix of that shape.
    A language model's head (GEMM -> log_softmax -> NLL -> GEMM) has none of these.

    Why it is slow
    --------------
    The S x S score matrix goes to memory and back several times (scores, scaled, masked,
    softmaxed, dropped out; the same again in backward) while the matmuls themselves are small.
    Fused attention (flash, cuDNN) keeps each tile on chip: memory traffic falls from O(S^2) to
    O(S·d) and the elementwise kernels disappear.

    Evidence
    --------
    The matched softmax sandwiches per step, the elementwise kernels inside them and their time.

    Example
    -------
    ```python
    scores = q @ k.transpose(-2, -1) / math.sqrt(d)
    scores = scores.masked_fill(mask, float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v
    ```

    Speedup model
    -------------
    Replay of the analysed steps with the kernels between the attention matmuls removed (the
    fused kernel does their work on chip) and the two matmuls next to them taking 0.3 of their
    time: unfused, they write and read the S x S scores; fused attention on H100 took 0.29 of
    their time in our measurement (`advisor.engine.hardware`). Low bound: the matmuls unchanged
    and a quarter of the removed time kept.

    Known false positives
    ---------------------
    Without recorded shapes (nsys without ``--pytorch``), a plain softmax over classes between two
    GEMMs (a classifier head followed by another GEMM) still matches; its softmax is small and
    usually falls under the reporting threshold. Shapes (``record_shapes=True``) remove it.

    References
    ----------
    Dao et al., FlashAttention (2022) and FlashAttention-2 (2023);
    ``torch.nn.functional.scaled_dot_product_attention`` documentation.
    """

    code = "KERN002"
    name = "unfused-attention"
    validation = Validation(  # fixtures/scenarios-check
        {"batch": 8, "seq": 1024, "heads": 12, "depth": 3},
        measured=3.49, runs=3)
    category = Category.KERNELS
    gate_signals = ("fused-attention",)
    mechanisms: ClassVar[Mapping[str, str]] = {
        "materialized-scores": "attention computed as matmul, mask/scale/softmax kernels and "
                               "matmul over the full S x S score matrix in memory",
    }
    fixes: ClassVar[tuple[FixVariant, ...]] = (
        FixVariant(
            "materialized-scores",
            "Use fused attention: F.scaled_dot_product_attention",
            "out = F.scaled_dot_product_attention(q, k, v, attn_mask=None, is_causal=True,\n"
            "                                     dropout_p=p if self.training else 0.0)\n"
            "# flash / cuDNN / memory-efficient kernels, chosen per shape and dtype"),
        FixVariant(
            "materialized-scores",
            "Load the model with fused attention: from_pretrained(..., attn_implementation=\"sdpa\")",
            "model = AutoModelForCausalLM.from_pretrained(name, attn_implementation=\"sdpa\")\n"
            "# or \"flash_attention_2\" with flash-attn installed (bf16/fp16)",
            framework="hf-trainer"),
    )
    model = ("replay with the softmax/mask/scale kernels between the attention matmuls "
             "removed and those matmuls at the measured fused-attention time")
    assumptions = (f"fused attention takes {FLASH_TO_UNFUSED_GEMM_FACTOR:g} of the time of the "
                   "score/context matmuls it replaces (H100, measured)",)
    confidence = Confidence.MODELED

    def check(self, graph: OpGraph, ctx: RuleContext) -> Iterable[Finding]:
        steps = ctx.steps
        blocks = [b for seq in stream_sequences(steps_ops(graph, steps))
                  for b in _attention_blocks(graph, seq)]
        if not blocks:
            return
        middles = [m for _, m, _ in blocks]
        ops = [o for m in middles for o in m]
        gemms = {g.id: g for a, _, b in blocks for g in (a, b)}
        flash = SetOpDurations(tuple((g.id, int(g.duration_ns * FLASH_TO_UNFUSED_GEMM_FACTOR))
                                     for g in gemms.values()))
        dispatch = ScaleHostWork(_between_launches(graph, blocks), 0.0)
        total = sum(o.duration_ns for o in ops)
        names = Counter(short_name(o.name) for o in ops)
        ids = tuple(o.id for o in ops)
        step_total = sum(s.time_ns for s in steps)
        yield ctx.finding(
            type(self),
            message=(f"{len(middles) / len(steps):.0f} unfused attention softmax blocks per step: "
                     f"{per_step(total, steps) / 1e6:.2f} ms of S x S elementwise kernels "
                     f"({total / step_total:.0%} of the step) between the attention matmuls"),
            evidence=Evidence(
                steps=tuple(s.index for s in steps),
                kernels=tuple(k for k, _ in names.most_common(6)),
                node_ids=tuple(f"gpu:{o.id}" for o in ops[:50]),
                quantities={"attention_blocks_per_step": len(middles) / len(steps),
                            "unfused_ns_per_step": per_step(total, steps),
                            "unfused_share": total / step_total if step_total else 0.0},
            ),
            mechanism="materialized-scores",
            effects=[DropOps(ids), flash, dispatch],
            low_effects=[DropOps(ids, KEEP_LOW)],
        )
