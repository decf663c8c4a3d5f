"""rng-bound-dropout: standalone dropout kernels spend GPU time generating random numbers."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import ClassVar

from advisor.engine.context import RuleContext
from advisor.engine.effects import DropOps
from advisor.engine.rule import Category, Confidence, Evidence, Finding, FixVariant, Rule, Status, Validation
from advisor.graph.kernels import KernelCategory, classify_name, short_name
from advisor.graph.model import GpuOpKind, OpGraph
from advisor.graph.queries import op_share, per_step, steps_ops

RNG_KEEP_LOW = 0.5
"""Pessimistic share of a standalone dropout kernel's time that stays once its random numbers
are generated inside the neighbouring kernel (the fused kernel still computes them; on H100
Philox costs about half of a dropout kernel that moves 2 bytes/element in and out)."""


_FUSED_WITH = {"add", "gelu", "relu", "silu", "bias", "residual", "norm", "layernorm", "rmsnorm",
               "softmax", "attn", "attention", "matmul", "mm", "gemm", "tanh", "sigmoid", "swiglu"}
"""Op names that, next to "dropout" in a kernel's name, say the dropout is fused into that op
(``triton_poi_fused_add_native_dropout_0``, a hand-written ``dropout_add_fwd``)."""
_BACKWARD = {"bwd", "backward", "grad"}


def is_standalone_rng(name: str) -> bool:
    """A kernel that generates random numbers and does nothing else.

    Kernels fusing dropout with other work are the fix, not the problem; backward kernels apply
    a saved mask or a seed and are not where dropout's random numbers are generated."""
    if classify_name(name) is not KernelCategory.RNG:
        return False
    tokens = set(re.split(r"[^a-z0-9]+", short_name(name, limit=400).lower()))
    return not (tokens & _FUSED_WITH or tokens & _BACKWARD)


class RngBoundDropout(Rule):
    """Dropout runs as separate random-number kernels that take a real share of the step.

    What it detects
    ---------------
    Kernels that generate random numbers for dropout (``fused_dropout``, ``bernoulli``,
    Philox/curand kernels) running standalone, next to the kernels that produce and consume their
    tensors, and taking a measurable share of the step's GPU time.

    Why it is slow
    --------------
    A standalone dropout reads the activation, generates one random number per element, and
    writes the result and a mask: a full extra pass over memory plus Philox work, for an
    operation that costs almost nothing inside the kernel that already touches the data.
    In MLPerf BERT, once attention was fused, dropout's RNG became the bottleneck.

    Evidence
    --------
    The RNG kernels per step, their time and share of the step.

    Example
    -------
    ```python
    h = self.fc2(F.gelu(self.fc1(x)))
    x = x + F.dropout(h, p=0.1, training=True)   # dropout kernel + add kernel
    ```

    Speedup model
    -------------
    Replay of the analysed steps with the standalone RNG kernels removed: their random numbers
    are generated inside the neighbouring fused kernel, where Philox hides under the memory
    traffic that kernel does anyway. Low bound: half of each RNG kernel's time remains.

    Known false positives
    ---------------------
    Random-number kernels that are not dropout (data augmentation on the GPU, noise for
    diffusion models) are matched too; they can also be fused, but check what they are.

    References
    ----------
    NVIDIA MLPerf Training BERT (8-bit compares for dropout masks: 4x RNG throughput, +4%);
    PyTorch ``torch.compile`` (Inductor fuses dropout with its neighbours).
    """

    code = "KERN001"
    name = "rng-bound-dropout"
    validation = Validation(  # fixtures/scenarios-check
        {"batch": 4, "seq": 8192, "d": 768, "heads": 12, "ff": 768, "mlp_blocks": 12},
        measured=1.12, runs=3)
    category = Category.KERNELS
    status = Status.STABLE  # validated on its H100 scenario: docs/validation.md
    mechanisms: ClassVar[Mapping[str, str]] = {
        "standalone-rng": "dropout runs as its own kernels (Philox random numbers, a mask, a "
                          "multiply), each reading and writing the whole activation",
    }
    knobs: ClassVar[Mapping[str, tuple[str, ...]]] = {"standalone-rng": ("compile",)}
    fixes: ClassVar[tuple[FixVariant, ...]] = (
        FixVariant(
            "standalone-rng",
            "Generate dropout's random numbers inside the neighbouring kernel (torch.compile, "
            "SDPA dropout)",
            "@torch.compile                                 # one Triton kernel: RNG inside\n"
            "def dropout_add(h, x, p: float):\n"
            "    return x + F.dropout(h, p=p, training=True)\n"
            "x = dropout_add(self.fc2(F.gelu(self.fc1(x))), x, 0.1)\n"
            "# attention dropout: F.scaled_dot_product_attention(q, k, v, dropout_p=0.1)"),
        FixVariant(
            "standalone-rng",
            "Fuse dropout's random numbers into its neighbours: TrainingArguments(torch_compile=True)",
            "args = TrainingArguments(..., torch_compile=True)\n"
            "# and fused attention dropout: from_pretrained(..., attn_implementation=\"sdpa\")",
            framework="hf-trainer", kind="config"),
        FixVariant(
            "standalone-rng",
            "Fuse dropout's random numbers into its neighbours: torch.compile the LightningModule",
            "model = torch.compile(model)          # the LightningModule, before trainer.fit\n"
            "trainer.fit(model, datamodule=dm)",
            framework="lightning"),
    )
    model = "replay with the standalone RNG kernels fused away"
    assumptions = ("the fused kernel's extra RNG work hides under its memory traffic",)
    confidence = Confidence.MODELED

    def check(self, graph: OpGraph, ctx: RuleContext) -> Iterable[Finding]:
        steps = ctx.steps
        rng = [o for o in steps_ops(graph, steps)
               if o.kind is GpuOpKind.KERNEL and is_standalone_rng(o.name)]
        if not rng:
            return
        share = op_share(rng, steps)
        names = Counter(short_name(o.name) for o in rng)
        total = sum(o.duration_ns for o in rng)
        ids = tuple(o.id for o in rng)
        yield ctx.finding(
            type(self),
            message=(f"{len(rng) / len(steps):.0f} standalone dropout/RNG kernels per step take "
                     f"{per_step(total, steps) / 1e6:.2f} ms ({share:.0%} of the step)"),
            evidence=Evidence(
                steps=tuple(s.index for s in steps),
                kernels=tuple(k for k, _ in names.most_common(5)),
                node_ids=tuple(f"gpu:{o.id}" for o in rng[:50]),
                quantities={"rng_kernels_per_step": len(rng) / len(steps),
                            "rng_ns_per_step": per_step(total, steps), "rng_share": share},
            ),
            mechanism="standalone-rng",
            effects=[DropOps(ids)],
            low_effects=[DropOps(ids, RNG_KEEP_LOW)],
        )
