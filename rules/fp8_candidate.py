"""fp8-candidate: large BF16/FP16 GEMMs dominate a step that FP8 would speed up, by a route that pays."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import replace
from itertools import pairwise
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
from advisor.graph.gemm_shapes import GEMM_OPERATORS, candidate_sizes, operator_name
from advisor.graph.kernels import KernelCategory, classify, input_shapes, op_precision, short_name
from advisor.graph.model import GpuOp, GpuOpKind, OpGraph
from advisor.graph.queries import per_step, steps_ops, uses_cuda_graphs

FP8_MIN_GEMM_NS = 50_000
"""Only GEMMs at least this long on H100 (>= ~35 GFLOP at the BF16 rate) are candidates."""
# FP8's cost, per 16-bit GEMM, measured from kernels (benchmarks/fp8_kernel_costs.py prints the
# tables): the FP8 captures of the fp8-candidate scenario (fit and check sets: torch._scaled_mm
# with compiled amax and cast kernels) and of the planted wide GPT (torchao float8 + compile,
# fixtures/public/planted-gpt-routes/trace_wide-fp8-compile.json.gz), each against the same
# GEMMs in BF16 (H100). No step time enters: the healthy steps FP8 measured slower on (issue #35,
# GEMMs of 57-174 us) are out of sample.
FP8_GEMM_EFFICIENCY = 1.08
"""FP8 GEMM time over (16-bit GEMM time x the GPU's 16-bit/FP8 rate ratio): 0.508-0.546 of the
BF16 kernel on the five GEMM shapes of those captures (158 us to 1.44 ms in BF16); the
least-squares line over them, FP8 = -3.7 us + 0.539 x BF16, has no fixed part, so the ratio
holds per GEMM down to the candidates' floor: 0.539 = 1.08 x 0.5."""
CAST_KERNELS_PER_GEMM = 3
"""Kernels FP8 adds per GEMM: each operand of a Linear (input, weight, output gradient; one per
GEMM, a Linear runs three) gets an amax reduction, a single-block scale kernel and a
scale/cast(/transpose) kernel (the scenario captures' compiled casts)."""
CAST_KERNEL_FLOOR_NS = 1_500
"""What a cast kernel costs however small its tensor: the scale kernels, which move no tensor,
took 1.47 us (median of 270, fp8-candidate captures). It does not shrink with the GEMM."""
CAST_BANDWIDTH_SHARE = 0.66
"""The casts' achieved bandwidth over the datasheet's: 2,218 B/ns on the H100 (3,350 GB/s),
the least-squares line over the 540 data-moving cast kernels of the fp8-candidate captures
(amax reductions and casts, 67-537 MB each; intercept 0.6 us)."""
CAST_BYTES_PER_ELEMENT = 8
"""Bytes the casts move per element of a 16-bit operand under the route named (torchao float8,
tensorwise dynamic scaling): the amax reads it (2), the cast reads it and writes FP8 (2 + 1), and
the backward GEMM's transposed FP8 copy is cast again from the 16-bit tensor (2 + 1). The
scenario captures, which write both layouts in one pass, moved 6; the wide GPT's FP8 step, its
GEMMs' kernel saving (19.55 ms) less its measured gain over compile alone (8.77 ms), leaves 6.9
per element of its GEMMs' outputs at the same bandwidth once the kernels' floors are out."""
CAST_EAGER_PER_FUSED = 10
"""Eager FP8's casts (each several unfused ATen ops and their dispatch) over the compiled
ones: the planted GPT routes measured eager FP8's added work at 4.45 and 5.0 times the step's
eager memory-bound time, the compiled casts' at 0.45 and 0.44 (eager FP8 ran 0.32x and 0.46x
of the eager BF16 step). Used for the note that eager FP8 is a loss, not for the estimate."""
NOT_CONVERTED = -1
"""`_output_elements`' answer for a GEMM the fix's FP8 training leaves in 16 bits: a batched
matmul (bmm, baddbmm: attention's scores and context, no Linear) or one with a size not a
multiple of 16 (torch._scaled_mm's requirement; torchao's filter skips such a Linear)."""
THINNEST_CUBE_SHARE = 0.29
"""Where no shape was recorded, the share of a GEMM's true operand elements the cube
(`operand_elements`) can be: the thinnest layers of the captures that record both, d-512 MLPs
over 8,192 tokens (0.55 on d-768 layers over 32,768 tokens, about 0.7 on the DDP job's d-1024 layers
over 8,192 tokens, 1.0 on the wide GPT and the fp8-candidate fit MLP). The casts priced at the
cube over this share are the pessimistic end of what the trace allows: an estimate that does
not survive it is withheld (the finding's band says how far it can go), because the cube alone
promised 1.02-1.06x over compile on the five rank traces of the DDP job where FP8 measured
0.94x and 0.96x of compile alone (issue #35, wave 11)."""
SAME_GEMM = 1.1
"""Two GEMM kernels of one name within this factor of each other's duration run the same
problem (a GEMM's run-to-run spread is a few percent): `_run_once` groups them."""
FP8_SIZE_MULTIPLE = 16
"""torch._scaled_mm needs every GEMM size a multiple of 16 (torchao's filter leaves other
Linears in 16 bits; so did the measured routes: pageable-memcpy's 1000-class head)."""
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
    Hopper's tensor cores do FP8 at twice the BF16 rate, so large GEMMs nearly halve (0.54 of
    the BF16 kernel, measured from 158 us to 1.4 ms). But FP8 adds work for every GEMM operand,
    forward and backward: an amax reduction, a scale and a cast (and a transposed copy) of each
    activation, weight and gradient, three kernels per GEMM. Fused (torch.compile, or Transformer
    Engine's fused modules) each costs at least 1.5 us and its bytes at two thirds of the
    bandwidth; a GEMM's operands shrink more slowly than its FLOPs, so the casts take a larger
    share of a smaller GEMM: at GPT-2 width (768) or on GEMMs under about 0.15 ms they cost more
    than FP8 saves. In eager mode they cost about ten times as much, making the step 2-3x slower.

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
    gets FP8 alone. Per large GEMM (left out: the head, a GEMM the step runs once, which the
    fix's filter keeps in BF16; batched matmuls and sizes not multiples of 16, which FP8
    training does not convert): its FP8 time, the GPU's BF16/FP8 rate ratio x 1.08 of it, plus
    its casts, 3 kernels x 1.5 us and 8 bytes per operand element at 0.66 of the bandwidth, its
    operands the outputs' elements where shapes were recorded, else the fewest a GEMM of its
    FLOPs can have (all measured on the FP8 kernel captures: benchmarks/fp8_kernel_costs.py).
    GEMMs whose casts cost more than FP8 saves count as losses against the others; the net
    saving is replayed on the GEMMs that pay. No finding when FP8 does not beat the route's own
    baseline by 2% (the compiled step without FP8), nor on a step already running FP8 GEMMs.
    Bounds: casts +-20%, GEMMs at 0.6 / 0.5.

    Known false positives
    ---------------------
    Layers whose accuracy suffers in FP8 (first layers, small heads) are usually kept in BF16;
    the estimate counts every large GEMM the step repeats (an output head run once is left out,
    one run per micro-batch under gradient accumulation is not). Without recorded shapes (nsys
    without the shape probe) a GEMM's operands are taken as the fewest its FLOPs allow: thin
    layers (many tokens on a narrow width) cast more than that, and the estimate is high for
    them: where FP8 does not still pay with the casts priced for the thinnest layers measured
    (the cube's elements over 0.29), the estimate is withheld and the band runs from that loss
    or gain to the cube's. Delayed or rowwise scaling and other recipes cost differently from the tensorwise
    dynamic scaling measured.

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
        precision = {o.id: op_precision(graph, o) for o in ops if classify(o) is KernelCategory.GEMM}
        if "fp8" in precision.values():
            return  # FP8 is in use: the 16-bit GEMMs left are the ones its filter keeps
        gemms = [o for o in ops if precision.get(o.id) == "fp16/bf16"
                 and o.duration_ns >= FP8_MIN_GEMM_NS]
        if not gemms:
            return
        found = find_chains(graph, steps)
        te = any(t in o.name.lower() for o in ops[:20000] for t in _TE)
        compiled = found.compiled or uses_cuda_graphs(graph, steps)
        if compiled:
            route, base = "compiled", []
        else:
            route, base = ("transformer-engine", []) if te else ("compile", fusion_effects(found.fusable))
        factor = _gemm_factor(gpu)
        head = _run_once(gemms, len(steps))
        sizes = {o.id: _output_elements(graph, o) for o in gemms}
        gemms = [o for o in gemms if sizes[o.id] != NOT_CONVERTED and o.id not in head]
        if not gemms:
            return
        shaped = sum(sizes[o.id] is not None for o in gemms)
        casts = {o.id: _cast_ns(o.duration_ns, gpu, sizes[o.id]) for o in gemms}
        cast_fused = sum(casts.values())
        cast_eager = CAST_EAGER_PER_FUSED * cast_fused
        total = sum(o.duration_ns for o in gemms)
        paying = [o for o in gemms if o.duration_ns * (1 - factor) > casts[o.id]]
        if not paying:
            return

        def fp8(gemm_factor: float, cast_scale: float) -> list[Effect]:
            return [*base, _fp8_durations(gemms, gemm_factor, casts, cast_scale)]

        before = ctx.speedup(base) if base else 1.0
        after = ctx.speedup(fp8(factor, 1.0))
        gain = after / before
        if gain < MIN_GAIN:
            return
        thin = None  # the speedup with unrecorded operands priced for the thinnest layers
        if shaped < len(gemms):
            thin_casts = {o.id: casts[o.id] if sizes[o.id] is not None else _cast_ns(
                o.duration_ns, gpu, int(operand_elements(o.duration_ns, gpu) / THINNEST_CUBE_SHARE))
                for o in gemms}
            thin = ctx.speedup([*base, _fp8_durations(gemms, factor, thin_casts, 1.0)])
        unpriced = thin is not None and thin / before < MIN_GAIN
        priced = f"up to {gain:.2f}x (no shapes to price it)" if unpriced else f"{gain:.2f}x"
        eager_saving = total * (1 - factor) - cast_eager
        names = Counter(short_name(o.name) for o in gemms)
        n = len(steps)
        note = {
            "compile": (f"only compiled (torch.compile or Transformer Engine): eager FP8 would add "
                        f"{per_step(cast_eager, steps) / 1e6:.1f} ms of unfused amax/cast kernels per step"
                        + (" (a loss)" if eager_saving < 0 else "")
                        + f"; estimate for compile + FP8, {priced} over compile alone"),
            "transformer-engine": f"Transformer Engine's fused casts ({priced})",
            "compiled": f"the compiler fusing its casts ({priced})",
        }[route]
        finding = ctx.finding(
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
                            "paying_gemms_per_step": len(paying) / n,
                            "fp8_cast_fused_ns_per_step": per_step(cast_fused, steps),
                            "fp8_cast_eager_ns_per_step": per_step(cast_eager, steps),
                            "gain_over_route_baseline": gain},
            ),
            mechanism={"compile": "eager-model", "compiled": "compiled-model",
                       "transformer-engine": "te-modules"}[route],
            requires=("compiler-fusion",) if route == "compile" else (),
            effects=fp8(factor, 1.0),
            low_effects=fp8(max(factor, 0.6), 1.2),
            high_effects=fp8(min(factor, 0.5), 0.8),
            model=("replay with each large 16-bit GEMM at the FP8 rate plus the fused amax/cast "
                   "kernels FP8 adds for it (a loss where they cost more than it saves)"
                   + (", together with the compiler-fusion rule's fusion (the route needs compile)"
                      if route == "compile" else "")),
            assumptions=(f"FP8 GEMM = {factor:.3f} of the BF16 GEMM time on the {gpu.name}",
                         f"per GEMM, {CAST_KERNELS_PER_GEMM} cast kernels of at least "
                         f"{CAST_KERNEL_FLOOR_NS / 1e3:g} us, moving {CAST_BYTES_PER_ELEMENT} B per "
                         f"operand element at {CAST_BANDWIDTH_SHARE:g} of the {gpu.name}'s bandwidth",
                         ("operands from the GEMMs' recorded shapes" if shaped == len(gemms) else
                          f"operands of {len(gemms) - shaped} of {len(gemms)} GEMMs not recorded "
                          "(no shapes in the trace): taken as the fewest a GEMM of their FLOPs can "
                          "have, so the gain is an upper bound where layers are thin (many tokens "
                          "on a narrow width); a capture with shapes (torch.profiler's "
                          "record_shapes, advisor profile --nsys's shape probe) prices them"),
                         "with compiler-fusion: includes its fusion (replayed once in the combined estimate)"
                         if route == "compile" else "the step's casts are already fused",
                         "accuracy holds with tensorwise dynamic scaling"),
            confidence=Confidence.MODELED,
        )
        if unpriced and thin is not None and not finding.estimate.withheld:
            finding = replace(finding, estimate=replace(
                finding.estimate, withheld=(
                    f"the trace records no shapes for {len(gemms) - shaped} of {len(gemms)} GEMMs, "
                    f"and FP8's casts on them decide it: {gain:.2f}x over {_BASELINE[route]} with "
                    f"their operands as few as their FLOPs allow, {thin / before:.2f}x on layers "
                    "as thin as the thinnest measured; capture with shapes (torch.profiler's "
                    "record_shapes, advisor profile --nsys's shape probe) to price it"),
                low=min(1.0, thin, finding.estimate.low)))
        yield finding


_BASELINE = {"compile": "compile alone", "compiled": "the compiled step",
             "transformer-engine": "the TE step"}


def _gemm_factor(gpu: GpuSpec) -> float:
    return FP8_GEMM_EFFICIENCY * gpu.half_rate / float(gpu.fp8 or gpu.half_rate)


def _run_once(gemms: list[GpuOp], steps: int) -> set[int]:
    """The GEMMs the step runs once: no other GEMM of the step has their kernel and a duration
    within `SAME_GEMM` of theirs. A model's layers repeat their GEMMs; the output head (and any
    one-off projection) does not, and the fix's module filter keeps it in 16 bits (``fqn !=
    "lm_head"``, as the measured FP8 routes did: the planted GPTs' FP8 steps ran their head in
    BF16, pageable-memcpy's 1000-class head stayed BF16). Kernel names and durations are all
    both trace formats give to tell it; a step that accumulates gradients over micro-batches runs
    its head once per micro-batch, and there the head is counted."""
    by_name: dict[str, list[GpuOp]] = {}
    for o in gemms:
        by_name.setdefault(o.name, []).append(o)
    once = set()
    for group in by_name.values():
        durations = sorted(o.duration_ns for o in group)
        for o in group:
            lo = bisect_left(durations, o.duration_ns / SAME_GEMM)
            hi = bisect_right(durations, o.duration_ns * SAME_GEMM)
            if (hi - lo) / steps < 1.5:
                once.add(o.id)
    return once


def _output_elements(graph: OpGraph, op: GpuOp) -> int | None:
    """M x N of the GEMM where its operator's shapes were recorded (torch.profiler's
    record_shapes, the nsys shape probe), else None; `NOT_CONVERTED` for a GEMM the fix leaves
    in 16 bits. Summed over a Linear's three GEMMs the outputs (y: M x N,
    dx: M x K, dw: N x K) are the three operands FP8 casts (x, w, dy)."""
    call = graph.launcher(op)
    for r in reversed(graph.ranges_at(call.pid, call.tid, call.start_ns) if call else ()):
        if operator_name(r.name) in GEMM_OPERATORS:
            shapes = input_shapes(r) or ()
            mats = [s for s in shapes if isinstance(s, tuple) and len(s) >= 2
                    and all(isinstance(d, int) for d in s)]
            # the operands: the first two matrices whose inner sizes agree (an addmm's 2-D bias
            # comes before them, the output buffer Inductor passes (``out=``) after them)
            pair = next(((a, b) for a, b in pairwise(mats) if a[-1] == b[-2]), None)
            if pair is None:
                return None
            a, b = pair
            if len(a) > 2 or len(b) > 2:
                return NOT_CONVERTED
            return _converted(a[-2], a[-1], b[-1])
    sizes = candidate_sizes(graph, op)  # the shape probe's, by kernel and launch
    if len(sizes) != 1:
        return None
    return _converted(*next(iter(sizes)))


def _converted(m: int, k: int, n: int) -> int:
    """The output's elements of an M x K x N GEMM FP8 training converts, else `NOT_CONVERTED`."""
    if any(d % FP8_SIZE_MULTIPLE for d in (m, k, n)):
        return NOT_CONVERTED
    return m * n


def operand_elements(gemm_ns: float, gpu: GpuSpec) -> float:
    """The fewest operand elements a 16-bit GEMM of this duration can have: its FLOPs at the
    GPU's dense 16-bit peak, F = 2 M K N, spread as a cube (M = K = N), whose three operands hold
    3 (F / 2)^(2/3) elements. FP8 casts one operand per GEMM, on average over a Linear's three
    GEMMs (input, weight and output gradient, each the size of one of the three GEMMs'
    outputs): (F / 2)^(2/3) per GEMM. The estimate where no shape was recorded (nsys without
    the shape probe: kernel durations are all it gives). Real layers are thinner than a cube
    (tokens >> width): against the shapes recorded, this gave 0.29-1.02 of the true elements on
    the captures here (1.0 on the wide GPT and the fp8-candidate fit MLP, 0.55 on d-768 layers
    over 32,768 tokens, 0.29 on d-512 MLPs over 8,192 tokens), so without shapes the casts are
    under-counted and the gain, if anything, over-stated."""
    flops = gemm_ns * 1e-9 * gpu.half_rate * 1e12
    return (flops / 2) ** (2 / 3)


def _cast_ns(gemm_ns: float, gpu: GpuSpec, elements: int | None = None) -> float:
    """FP8's fused amax/scale/cast kernels for one 16-bit GEMM: a floor per kernel that does not
    shrink with the GEMM, and the bytes its operand's casts move at the casts' bandwidth: the
    GEMM's output elements where its shapes were recorded, else the fewest its FLOPs allow."""
    bytes_per_ns = CAST_BANDWIDTH_SHARE * gpu.bandwidth_gbs  # GB/s = B/ns
    n = operand_elements(gemm_ns, gpu) if elements is None else elements
    return CAST_KERNELS_PER_GEMM * CAST_KERNEL_FLOOR_NS + n * CAST_BYTES_PER_ELEMENT / bytes_per_ns


def _fp8_durations(gemms: list[GpuOp], factor: float, casts: Mapping[int, float],
                   cast_scale: float) -> SetOpDurations:
    """Each GEMM's FP8 saving is its 16-bit time less its FP8 time and the casts FP8 adds for it:
    negative where the casts cost more than FP8 saves. The route converts every Linear, so the
    losses count against the gains; the replay can only shorten a kernel, so the step's net
    saving is taken from the GEMMs that pay, each in proportion to its own saving (none when
    the net is not a saving)."""
    saving = {o.id: o.duration_ns * (1 - factor) - casts[o.id] * cast_scale for o in gemms}
    net = sum(saving.values())
    paid = sum(v for v in saving.values() if v > 0)
    if net <= 0 or paid <= 0:
        return SetOpDurations(())
    share = net / paid
    return SetOpDurations(tuple((o.id, int(o.duration_ns - saving[o.id] * share))
                                for o in gemms if saving[o.id] > 0))
