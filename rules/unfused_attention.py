"""unfused-attention: attention as matmul, softmax, matmul over the whole S x S matrix."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable

from advisor.engine.context import RuleContext
from advisor.engine.effects import DropOps, SetOpDurations
from advisor.engine.hardware import FLASH_TO_UNFUSED_GEMM_FACTOR
from advisor.engine.rule import Category, Confidence, Evidence, Finding, Fix, Rule
from advisor.graph.kernels import KernelCategory, classify, short_name
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


def _attention_blocks(seq: list[GpuOp]) -> list[tuple[GpuOp, list[GpuOp], GpuOp]]:
    """(GEMM, the non-GEMM kernels containing a softmax or its backward, GEMM) on one stream."""
    out = []
    gemm_at = [i for i, o in enumerate(seq) if classify(o) is KernelCategory.GEMM]
    for a, b in itertools.pairwise(gemm_at):
        middle = seq[a + 1 : b]
        if not middle or len(middle) > MAX_BETWEEN:
            continue
        cats = [classify(o) for o in middle]
        if KernelCategory.SOFTMAX in cats and all(c in _BETWEEN_OK for c in cats):
            out.append((seq[a], middle, seq[b]))
    return out


class UnfusedAttention(Rule):
    """Attention is computed as matmul, softmax, matmul over a full sequence-by-sequence matrix.

    What it detects
    ---------------
    A softmax (forward or backward) sandwiched between two GEMMs with only elementwise work
    (scaling, masking, dropout, casts) between them, on the same stream: the signature of
    ``softmax(q @ k.T / sqrt(d) + mask) @ v`` written out, and of its backward.

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

    Use instead
    -----------
    ```python
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=None, is_causal=True)
    # flash / cuDNN / memory-efficient kernels, chosen per shape and dtype
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
    A classifier head (GEMM, softmax, GEMM of the next layer) matches the pattern; its softmax is
    over classes, small, and usually falls under the reporting threshold.

    References
    ----------
    Dao et al., FlashAttention (2022) and FlashAttention-2 (2023);
    ``torch.nn.functional.scaled_dot_product_attention`` documentation.
    """

    code = "KERN002"
    name = "unfused-attention"
    category = Category.KERNELS

    def check(self, graph: OpGraph, ctx: RuleContext) -> Iterable[Finding]:
        steps = ctx.steps
        blocks = [b for seq in stream_sequences(steps_ops(graph, steps)) for b in _attention_blocks(seq)]
        if not blocks:
            return
        middles = [m for _, m, _ in blocks]
        ops = [o for m in middles for o in m]
        gemms = {g.id: g for a, _, b in blocks for g in (a, b)}
        flash = SetOpDurations(tuple((g.id, int(g.duration_ns * FLASH_TO_UNFUSED_GEMM_FACTOR))
                                     for g in gemms.values()))
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
            fix=Fix(
                title="Use fused attention: F.scaled_dot_product_attention",
                snippet="out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, dropout_p=p)",
            ),
            effects=[DropOps(ids), flash],
            low_effects=[DropOps(ids, KEEP_LOW)],
            model=("replay with the softmax/mask/scale kernels between the attention matmuls "
                   "removed and those matmuls at the measured fused-attention time"),
            assumptions=(f"fused attention takes {FLASH_TO_UNFUSED_GEMM_FACTOR:g} of the time of the "
                         "score/context matmuls it replaces (H100, measured)",),
            confidence=Confidence.MODELED,
        )
