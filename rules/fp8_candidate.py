"""fp8-candidate: large BF16/FP16 GEMMs dominate a step that FP8 would speed up, by a route that pays."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import ClassVar

from advisor.rules.compiler_fusion import fusion_effects

from advisor.engine.context import RuleContext
from advisor.engine.effects import Effect, SetOpDurations
from advisor.engine.gpus import GpuSpec, trace_gpu
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
from advisor.graph.kernels import KernelCategory, classify, op_precision, short_name
from advisor.graph.model import GpuOp, GpuOpKind, OpGraph
from advisor.graph.queries import per_step, steps_ops, uses_cuda_graphs

FP8_MIN_GEMM_NS = 50_000
"""Only GEMMs at least this long on H100 (>= ~35 GFLOP at the BF16 rate) are candidates."""
FP8_GEMM_EFFICIENCY = 1.05
"""FP8 GEMM time over (BF16 GEMM time x the GPU's BF16/FP8 rate ratio): the planted wide GPT's
block GEMMs ran 41.14 ms in BF16 and 21.59 ms in FP8 (torchao tensorwise, H100), 0.525 = 1.05 x
0.5 (fixtures/scenarios/compiler-fusion)."""
CAST_FUSED_PER_EAGER_MEMORY = 0.45
"""FP8's added work (an amax reduction and a scale/cast/transpose for each GEMM operand, forward
and backward) when compiled, as a share of the step's eager memory-bound kernel time. Both scale
with tokens x width per layer (the casts read and write each activation and gradient once more,
as the eager elementwise kernels do), so the share holds across widths: measured 0.45 on the
planted GPT-2-size and 0.44 on the wide GPT (H100, torchao float8 + torch.compile against
torch.compile alone: step difference plus the GEMM time FP8 saved)."""
CAST_EAGER_PER_EAGER_MEMORY = 4.7
"""The same work in eager mode (each cast several unfused ATen ops and their dispatch): 4.45 and
5.0 on the same two models; eager FP8 ran 0.32x and 0.46x of the eager BF16 step."""
COMPILED_MEMORY_RETENTION = 0.45
"""Inductor's memory-bound kernel time over the eager chains' on the same step (10.96 / 24.45 ms,
planted GPT-2-size): converts a compiled step's memory-bound time back to the eager measure."""
# Where these come from: FP8_GEMM_EFFICIENCY and the two cast shares were measured on the planted
# GPT routes (fixtures/public/planted-gpt-routes, fixtures/scenarios/compiler-fusion), so the
# planted rows of docs/validation.md are in sample for them; the fp8-candidate scenario captures
# (fit and check sets, an MLP with FP8 through compiled casts) were not used and are the check.
MIN_GAIN = 1.02
"""FP8 must beat its route's own baseline (the compiled step) by this much to be reported."""
_TE = ("transformer_engine", "cast_transpose", "te_gemm", "nvte_")


class Fp8Candidate(Rule):
    """Large BF16/FP16 GEMMs dominate the step: FP8 would run them faster, by a route that pays.

    What it detects
    ---------------
    On GPUs with FP8 tensor cores (Ada, Hopper, Blackwell; not V100 or A100), BF16 or FP16 GEMM
    kernels long enough to be compute-bound (>= 50 µs each), when running them in FP8 with the
    casts it adds still makes the step faster than the same step without FP8.

    Why it is slow
    --------------
    Hopper's tensor cores do FP8 at twice the BF16 rate, so large GEMMs nearly halve. But FP8
    adds work for every GEMM operand, forward and backward: an amax reduction and a
    scale/cast/transpose pass over each activation, weight and gradient. Fused (torch.compile,
    or Transformer Engine's fused modules) that work costs about 0.45 of the step's eager
    memory-bound time; in eager mode about 4.7 times it, which makes the step 2-3x slower. At
    GPT-2 width (768) the fused casts still cost more than the GEMMs save.

    Evidence
    --------
    The large 16-bit GEMMs per step, their time and share of the step, the route (compiled,
    Transformer Engine, or eager), the added cast time per route and the gain over the route's
    own baseline.

    Example
    -------
    ```python
    with torch.autocast("cuda", dtype=torch.bfloat16):
        y = mlp(x)                         # BF16 GEMMs dominate the step
    ```

    Speedup model
    -------------
    The route the user needs: an eager step gets the compiled route (FP8 with torch.compile), and
    its replay applies the compiler-fusion rule's fusion together with FP8; a compiled or TE step
    gets FP8 alone. The large GEMMs take the GPU's BF16/FP8 rate ratio x 1.05 (measured) of their
    time, and the casts (0.45 x the eager memory-bound time, measured) are charged to them: each
    GEMM keeps its share of the net saving. No finding when FP8 does not beat the route's own
    baseline by 2% (the compiled step without FP8). Bounds: casts +-20%, GEMMs at 0.6 / 0.5.

    Known false positives
    ---------------------
    Layers whose accuracy suffers in FP8 (first/last layers, small heads) are usually kept in
    BF16; the estimate counts every large GEMM. Delayed or rowwise scaling and other recipes cost
    differently from the tensorwise dynamic scaling measured.

    References
    ----------
    NVIDIA Transformer Engine documentation (FP8 primer); torchao float8 training README
    ("float8 ... with torch.compile"); NVIDIA H100 whitepaper (FP8: 2x BF16 throughput).
    """

    code = "PREC002"
    name = "fp8-candidate"
    requires = (Requirement.STEPS, Requirement.GPU_WORK, Requirement.KNOWN_GPU)
    """A named GPU outside advisor's table is skipped: the model is a ratio of its rates."""
    validation = Validation(  # fixtures/scenarios-check
        {"tokens": 16384, "d": 2048, "ff": 8192, "depth": 3},
        measured=1.2, runs=3)
    category = Category.PRECISION
    opportunity = True  # BF16 GEMMs are FP8 candidates: a change exposes it
    status = Status.STABLE  # validated on its H100 scenario: docs/validation.md
    mechanisms: ClassVar[Mapping[str, str]] = {
        "eager-model": "large 16-bit GEMMs in an eager model: FP8 pays only compiled, since "
                       "eager FP8 casts cost more than FP8 saves",
        "compiled-model": "large 16-bit GEMMs in a compiled model, whose casts the compiler fuses",
        "te-modules": "large 16-bit GEMMs next to Transformer Engine modules, whose FP8 casts "
                      "are fused",
    }
    fixes: ClassVar[tuple[FixVariant, ...]] = (
        FixVariant(
            "eager-model",
            "Train the large GEMMs in FP8 with torchao float8, compiled (never eager)",
            "from torchao.float8 import convert_to_float8_training\n"
            "convert_to_float8_training(model, module_filter_fn=lambda m, fqn: fqn != \"lm_head\")\n"
            "model = torch.compile(model)  # required: eager FP8 casts cost more than FP8 saves"),
        FixVariant(
            "compiled-model",
            "Train the large GEMMs in FP8 with torchao float8 before compiling",
            "from torchao.float8 import convert_to_float8_training\n"
            "convert_to_float8_training(model, module_filter_fn=lambda m, fqn: fqn != \"lm_head\")\n"
            "model = torch.compile(model)"),
        FixVariant(
            "te-modules",
            "Run the remaining large GEMMs in FP8 through Transformer Engine's modules",
            "import transformer_engine.pytorch as te\n"
            "layer = te.Linear(in_features, out_features)\n"
            "with te.fp8_autocast(enabled=True):\n"
            "    y = layer(x)"),
        FixVariant(
            "te-modules",
            "Run the large GEMMs in FP8 through Transformer Engine: "
            "Trainer(plugins=TransformerEnginePrecision(...))",
            "from lightning.pytorch.plugins import TransformerEnginePrecision\n"
            "trainer = Trainer(..., plugins=TransformerEnginePrecision(weights_dtype=torch.bfloat16))",
            framework="lightning", kind="config"),
    )

    def check(self, graph: OpGraph, ctx: RuleContext) -> Iterable[Finding]:
        steps = ctx.steps
        ops = [o for o in steps_ops(graph, steps) if o.kind is GpuOpKind.KERNEL]
        gpu = trace_gpu(graph, (o.name for o in ops[:20000]))
        if gpu is None or not gpu.has_fp8:
            return
        gemms = [o for o in ops if classify(o) is KernelCategory.GEMM
                 and op_precision(graph, o) == "fp16/bf16" and o.duration_ns >= FP8_MIN_GEMM_NS]
        if not gemms:
            return
        found = find_chains(graph, steps)
        te = any(t in o.name.lower() for o in ops[:20000] for t in _TE)
        compiled = found.compiled or uses_cuda_graphs(graph, steps)
        if compiled:
            eager_memory = found.inductor_ns / COMPILED_MEMORY_RETENTION + found.eager_ns
            route, base = "compiled", []
        else:
            eager_memory = found.eager_ns
            route, base = ("transformer-engine", []) if te else ("compile", fusion_effects(found.fusable))
        cast_fused = CAST_FUSED_PER_EAGER_MEMORY * eager_memory
        cast_eager = CAST_EAGER_PER_EAGER_MEMORY * eager_memory
        factor = _gemm_factor(gpu)
        total = sum(o.duration_ns for o in gemms)

        def fp8(gemm_factor: float, cast_ns: float) -> list[Effect]:
            return [*base, _fp8_durations(gemms, gemm_factor, cast_ns)]

        before = ctx.speedup(base) if base else 1.0
        after = ctx.speedup(fp8(factor, cast_fused))
        gain = after / before
        if gain < MIN_GAIN:
            return
        eager_saving = total * (1 - factor) - cast_eager
        names = Counter(short_name(o.name) for o in gemms)
        n = len(steps)
        note = {
            "compile": (f"only compiled (torch.compile or Transformer Engine): eager FP8 would add "
                        f"{per_step(cast_eager, steps) / 1e6:.1f} ms of unfused amax/cast kernels per step"
                        + (" (a loss)" if eager_saving < 0 else "")
                        + f"; estimate for compile + FP8, {gain:.2f}x over compile alone"),
            "transformer-engine": f"Transformer Engine's fused casts ({gain:.2f}x)",
            "compiled": f"the compiler fusing its casts ({gain:.2f}x)",
        }[route]
        yield ctx.finding(
            type(self),
            message=(f"{len(gemms) / n:.0f} large 16-bit GEMMs per step take "
                     f"{per_step(total, steps) / 1e6:.2f} ms "
                     f"({total / sum(s.time_ns for s in steps):.0%} of the step): FP8 pays on the "
                     f"{gpu.name} {note}"),
            evidence=Evidence(
                steps=tuple(s.index for s in steps),
                kernels=tuple(k for k, _ in names.most_common(5)),
                node_ids=tuple(f"gpu:{o.id}" for o in gemms[:50]),
                quantities={"large_gemms_per_step": len(gemms) / n,
                            "large_gemm_ns_per_step": per_step(total, steps),
                            "large_gemm_share": total / sum(s.time_ns for s in steps),
                            "fp8_cast_fused_ns_per_step": per_step(cast_fused, steps),
                            "fp8_cast_eager_ns_per_step": per_step(cast_eager, steps),
                            "gain_over_route_baseline": gain},
            ),
            mechanism={"compile": "eager-model", "compiled": "compiled-model",
                       "transformer-engine": "te-modules"}[route],
            requires=("compiler-fusion",) if route == "compile" else (),
            effects=fp8(factor, cast_fused),
            low_effects=fp8(max(factor, 0.6), cast_fused * 1.2),
            high_effects=fp8(min(factor, 0.5), cast_fused * 0.8),
            model=("replay with the large 16-bit GEMMs at the FP8 rate and FP8's amax/cast work fused"
                   + (", together with the compiler-fusion rule's fusion (the route needs compile)"
                      if route == "compile" else "")),
            assumptions=(f"FP8 GEMM = {factor:.3f} of the BF16 GEMM time on the {gpu.name}",
                         f"fused casts cost {CAST_FUSED_PER_EAGER_MEMORY:g} x the eager memory-bound time",
                         "with compiler-fusion: includes its fusion (replayed once in the combined estimate)"
                         if route == "compile" else "the step's casts are already fused",
                         "accuracy holds with tensorwise dynamic scaling"),
            confidence=Confidence.MODELED,
        )


def _gemm_factor(gpu: GpuSpec) -> float:
    return FP8_GEMM_EFFICIENCY * gpu.half_rate / float(gpu.fp8 or gpu.half_rate)


def _fp8_durations(gemms: list[GpuOp], factor: float, cast_ns: float) -> SetOpDurations:
    """Each GEMM keeps its share of the net saving (FP8 time saved minus the casts), so a cast
    cost larger than the saving changes nothing rather than shrinking some GEMMs."""
    total = sum(o.duration_ns for o in gemms)
    net = max(0.0, total * (1 - factor) - cast_ns)
    keep = 1 - net / total if total else 1.0
    return SetOpDurations(tuple((o.id, int(o.duration_ns * keep)) for o in gemms))
