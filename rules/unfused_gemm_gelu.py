"""unfused-gemm-gelu: a GELU kernel re-reads the output of the GEMM before it."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import ClassVar

from advisor.engine.context import RuleContext
from advisor.engine.effects import DropOps, ExtendOps
from advisor.engine.rule import Category, Confidence, Evidence, Finding, FixVariant, Rule, Status, Validation
from advisor.graph.kernels import KernelCategory, classify, has_gelu_epilogue, is_gelu, short_name
from advisor.graph.model import GpuOp, OpGraph, Step
from advisor.graph.queries import inside, per_step, step_of, steps_ops, stream_sequences

EPILOGUE_KEEP = 0.15
"""Share of the GELU kernel's time the GEMM epilogue still costs in the pessimistic bound where
no backward pass reads the pre-activation (eval, the first pass of activation checkpointing):
the epilogue computes GELU on registers and writes only the activation."""

AUX_WRITE_SHARE = 0.5
"""Share of a GELU kernel's time that moves into its GEMM when a backward pass needs the
pre-activation: the epilogue must then write it too (cuBLASLt ``GELU_AUX``, Transformer Engine's
training path). The GELU kernel makes two passes over the tensor (it reads the GEMM's output and
writes the activation); the fused GEMM still writes two tensors where it wrote one, so it saves
the read and keeps one write: half the traffic. Measured on the H200 with the epilogue itself
(`benchmarks/scenarios/gelu_epilogue.py --check`, 7 fc1 shapes, CUDA-graph replays, wave 12):
the fused GEMM saved 0.07-0.53 of the GELU kernel's time, never more than about half."""

AUX_KEEP_LOW = 1.0
"""The pessimistic bound where the pre-activation is kept: the fused GEMM gives back all the GELU
kernel's time (one of the seven measured shapes saved 7% of it), and the launch's host work stays
(the fix's own host path, Transformer Engine's Python modules or ours, costs more than one
launch: 45-115 us a site against eager's, wave 12)."""


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
    Replay of the analysed steps with the forward GELU kernels that follow a GEMM removed. Where
    no backward pass reads the pre-activation (eval, a checkpointed block's no-grad first pass)
    the epilogue's cost hides in the GEMM; where one does (training: as many forward GELUs as
    the steps run GELU backward kernels beyond those of recomputed GELUs), the fused GEMM must
    also write the pre-activation, and half the GELU's time moves into it (`AUX_WRITE_SHARE`).
    When phases are marked, pairs in the backward phase (activation recomputation) are left
    alone. Low bound: 15% of each GELU's time stays in the epilogue; a GEMM that keeps the
    pre-activation gives back all of it, and its launch's host work stays.

    Known false positives
    ---------------------
    GELU after a GEMM whose output is also needed un-activated by another consumer (the
    epilogue can write both, at the cost of the extra write). A step within a few percent of
    being host-bound: the routes to the epilogue (Transformer Engine's modules, a custom
    autograd Function) cost more host time a site than the eager GEMM and GELU (measured: a
    1.03x estimate, 0.99x timed; docs/validation.md).

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
    model = ("replay with the forward GELU kernels folded into their GEMM's epilogue; for the "
             "${aux_pairs} of ${pairs} pairs a step whose pre-activation a backward pass reads, the "
             "GEMM also writes it and keeps ${aux_keep} of the GELU's time")
    assumptions = (
        "the epilogue's GELU itself costs nothing measurable in the GEMM",
        "writing the pre-activation for the backward pass costs the GEMM half the GELU kernel's "
        "time (one of its two passes over the tensor)",
    )
    confidence = Confidence.MODELED

    def check(self, graph: OpGraph, ctx: RuleContext) -> Iterable[Finding]:
        steps = ctx.steps
        # With marked phases, only forward-pass pairs: a GEMM -> GELU inside the backward phase is
        # activation recomputation, which runs with autograd on and keeps its GELU.
        backward = [span for s in steps for span in s.phases.get("backward", [])]
        ops = steps_ops(graph, steps)
        pairs: list[tuple[GpuOp, GpuOp]] = []  # (GEMM, GELU)
        recomputed = 0
        for seq in stream_sequences(ops):
            for prev, op in itertools.pairwise(seq):
                if not is_gelu(op.name) or "backward" in op.name.lower() \
                        or classify(prev) is not KernelCategory.GEMM:
                    continue
                call = graph.launcher(op)
                if call is not None and inside(call.start_ns, backward):
                    recomputed += 1
                    continue
                pairs.append((prev, op))
        if not pairs:
            return
        aux = self._keeping_aux(graph, steps, pairs, _gelu_backwards(ops) - recomputed)
        gelus = [g for _, g in pairs]
        total = sum(o.duration_ns for o in gelus)
        ids = tuple(o.id for o in gelus)
        plain = tuple(g.id for _, g in pairs if g.id not in aux)
        kept = [(gemm, gelu) for gemm, gelu in pairs if gelu.id in aux]
        names = Counter(short_name(o.name) for o in gelus)
        step_total = sum(s.time_ns for s in steps)
        n = len(steps)

        def longer_gemms(share: float) -> list[ExtendOps]:
            if not kept:
                return []
            return [ExtendOps(tuple((gemm.id, int(gelu.duration_ns * share)) for gemm, gelu in kept))]

        keep_note = (f"; {len(kept) / n:.0f} of them feed a backward pass, so the epilogue must also "
                     "write the pre-activation: about half of their time stays") if kept else ""
        yield ctx.finding(
            type(self),
            message=(f"{len(gelus) / n:.0f} GEMM -> GELU pairs per step run the GELU as its "
                     f"own kernel: {per_step(total, steps) / 1e6:.3f} ms "
                     f"({total / step_total:.1%} of the step){keep_note}"),
            evidence=Evidence(
                steps=tuple(s.index for s in steps),
                kernels=tuple(k for k, _ in names.most_common(3)),
                node_ids=tuple(f"gpu:{o.id}" for o in gelus[:50]),
                quantities={"gemm_gelu_pairs_per_step": len(gelus) / n,
                            "gelu_ns_per_step": per_step(total, steps),
                            "pairs_keeping_pre_activation_per_step": len(kept) / n},
            ),
            mechanism="separate-activation",
            params={"pairs": f"{len(gelus) / n:.0f}", "aux_pairs": f"{len(kept) / n:.0f}",
                    "aux_keep": f"{AUX_WRITE_SHARE:.0%}"},
            effects=[DropOps(ids), *longer_gemms(AUX_WRITE_SHARE)],
            low_effects=[*([DropOps(plain, EPILOGUE_KEEP)] if plain else []),
                         *([DropOps(tuple(g.id for _, g in kept), keep_launches=True)] if kept else []),
                         *longer_gemms(AUX_KEEP_LOW)],
        )

    @staticmethod
    def _keeping_aux(graph: OpGraph, steps: Sequence[Step], pairs: list[tuple[GpuOp, GpuOp]],
                     needed: int) -> set[int]:
        """The GELUs whose pre-activation a backward pass reads (their fused GEMM must write it
        too): as many as the steps run GELU backward kernels beyond those of recomputed GELUs,
        the latest of each step first (a checkpointed block's no-grad first pass runs before the
        forward passes whose activations backward reads). All, in plain training; none in eval,
        or where every forward GELU is recomputed in the backward phase."""
        if needed <= 0:
            return set()
        if needed >= len(pairs):
            return {g.id for _, g in pairs}
        by_step: dict[int, list[GpuOp]] = {}
        for _, g in pairs:
            call = graph.launcher(g)
            step = step_of(steps, call.start_ns) if call is not None else None
            by_step.setdefault(step.index if step is not None else -1, []).append(g)
        share = needed / len(pairs)
        kept: set[int] = set()
        for gelus in by_step.values():
            gelus.sort(key=lambda o: o.start_ns)
            take = round(share * len(gelus))
            kept.update(o.id for o in gelus[len(gelus) - take:])
        return kept


def _gelu_backwards(ops: Iterable[GpuOp]) -> int:
    """GELU backward kernels (eager's ``GeluBackward``, Inductor's ``..._gelu_backward_...``), and
    GEMMs with a dGELU epilogue (Transformer Engine's backward)."""
    n = 0
    for o in ops:  # the name tests are memoised; only a GELU's own name is lowered
        if is_gelu(o.name):
            n += "backward" in o.name.lower()
        elif has_gelu_epilogue(o.name):
            n += "dgelu" in o.name.lower()
    return n
