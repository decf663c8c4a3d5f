"""unfused-gemm-gelu: a GELU kernel re-reads the output of the GEMM before it."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import ClassVar

from advisor.engine.context import RuleContext
from advisor.engine.effects import DropOps
from advisor.engine.rule import Category, Confidence, Evidence, Finding, FixVariant, Rule, Status, Validation
from advisor.graph.kernels import KernelCategory, classify, is_gelu, short_name
from advisor.graph.model import OpGraph
from advisor.graph.queries import inside, per_step, steps_ops, stream_sequences

EPILOGUE_KEEP = 0.15
"""Share of the GELU kernel's time the GEMM epilogue still costs in the pessimistic bound (the
epilogue computes GELU on registers; only the extra output write of the aux tensor remains)."""


class UnfusedGemmGelu(Rule):
    """A GEMM is followed by a separate GELU kernel over its output.

    What it detects
    ---------------
    A GELU (or bias+GELU) elementwise kernel that runs right after a GEMM on the same stream, in
    the forward pass: the GEMM wrote its output to memory and the GELU reads it back.

    Why it is slow
    --------------
    The GELU kernel moves the whole activation through memory twice (read, write) and costs a
    launch, while cuBLASLt can apply GELU in the GEMM's epilogue on data still in registers.

    Evidence
    --------
    GEMM -> GELU pairs per step and the GELU kernels' time.

    Example
    -------
    ```python
    h = F.gelu(F.linear(x, w1, b1))      # GEMM kernel, then a GELU kernel
    ```

    Speedup model
    -------------
    Replay of the analysed steps with the forward GELU kernels that follow a GEMM removed (the
    epilogue's cost hides in the GEMM). When phases are marked, pairs in the backward phase
    (activation recomputation) are left alone. Low bound: 15% of each GELU's time stays in the
    epilogue.

    Known false positives
    ---------------------
    GELU after a GEMM whose output is also needed un-activated by another consumer (the
    epilogue can write both, at the cost of the extra write).

    References
    ----------
    cuBLASLt ``CUBLASLT_EPILOGUE_GELU``/``GELU_AUX_BIAS``; NVIDIA MLPerf Training BERT (GEMM+GELU
    fusion, +5% with other cuBLAS work).
    """

    code = "KERN003"
    name = "unfused-gemm-gelu"
    validation = Validation(  # fixtures/scenarios-check
        {"seq": 8192, "d": 512, "ff": 4096, "mlp_blocks": 4},
        measured=1.13, runs=3)
    category = Category.KERNELS
    gate_signals = ("standalone-gelu",)
    status = Status.STABLE  # validated on its H100 scenario: docs/validation.md
    mechanisms: ClassVar[Mapping[str, str]] = {
        "separate-activation": "each GELU runs as its own kernel after the GEMM that produced its "
                               "input, reading and writing the activation once more",
    }
    fixes: ClassVar[tuple[FixVariant, ...]] = (
        FixVariant(
            "separate-activation",
            "Fuse GELU into the GEMM epilogue",
            "# Transformer Engine fuses GELU (forward) and dGELU (backward) into cuBLASLt epilogues:\n"
            "mlp = te.LayerNormMLP(hidden, ffn, activation=\"gelu\")\n"
            "# PyTorch alone: the epilogue where autograd is off (eval, or the first pass of\n"
            "# activation checkpointing; torch._addmm_activation has no backward):\n"
            "if not torch.is_grad_enabled():\n"
            "    h = torch._addmm_activation(b1, x2d, w1.t(), use_gelu=True)\n"
            "else:\n"
            "    h = F.gelu(F.linear(x, w1, b1))"),
    )
    model = "replay with the forward GELU kernels folded into their GEMM's epilogue"
    assumptions = ("the epilogue's GELU costs nothing measurable in the GEMM",)
    confidence = Confidence.MODELED

    def check(self, graph: OpGraph, ctx: RuleContext) -> Iterable[Finding]:
        steps = ctx.steps
        # With marked phases, only forward-pass pairs: a GEMM -> GELU inside the backward phase is
        # activation recomputation, which runs with autograd on and keeps its GELU.
        backward = [span for s in steps for span in s.phases.get("backward", [])]
        gelus = []
        for seq in stream_sequences(steps_ops(graph, steps)):
            for prev, op in itertools.pairwise(seq):
                if not is_gelu(op.name) or "backward" in op.name.lower() \
                        or classify(prev) is not KernelCategory.GEMM:
                    continue
                call = graph.launcher(op)
                if call is not None and inside(call.start_ns, backward):
                    continue
                gelus.append(op)
        if not gelus:
            return
        total = sum(o.duration_ns for o in gelus)
        ids = tuple(o.id for o in gelus)
        names = Counter(short_name(o.name) for o in gelus)
        step_total = sum(s.time_ns for s in steps)
        yield ctx.finding(
            type(self),
            message=(f"{len(gelus) / len(steps):.0f} GEMM -> GELU pairs per step run the GELU as its "
                     f"own kernel: {per_step(total, steps) / 1e6:.3f} ms "
                     f"({total / step_total:.1%} of the step)"),
            evidence=Evidence(
                steps=tuple(s.index for s in steps),
                kernels=tuple(k for k, _ in names.most_common(3)),
                node_ids=tuple(f"gpu:{o.id}" for o in gelus[:50]),
                quantities={"gemm_gelu_pairs_per_step": len(gelus) / len(steps),
                            "gelu_ns_per_step": per_step(total, steps)},
            ),
            mechanism="separate-activation",
            effects=[DropOps(ids)],
            low_effects=[DropOps(ids, EPILOGUE_KEEP)],
        )
