"""FP8's per-GEMM costs, measured from the FP8 kernel captures in fixtures/ (issue #35).

fp8-candidate's cost model (rules/fp8_candidate.py) prices FP8 per 16-bit GEMM: what the FP8
GEMM costs against the 16-bit one, and what the amax/scale/cast kernels FP8 adds cost. Both are
read here from kernels, not step times, on the three captures that ran WITH FP8 (tensorwise
dynamic scaling, casts compiled) and their 16-bit counterparts (H100 80GB HBM3):

* ``fp8-candidate`` fit and check scenario captures (``good``: ``torch._scaled_mm`` with a
  compiled amax + scale + cast/transpose per operand, as torchao float8 does; ``bad``: the same
  MLP in BF16 autocast);
* the planted wide GPT (d 2560 x 8 layers): ``trace_wide-fp8-compile.json.gz`` (torchao float8
  + ``torch.compile``) against its eager BF16 capture (``trace.json.gz``: Inductor keeps cuBLAS
  for the GEMMs, so the 16-bit GEMM kernels are the ones the compiled step runs).

Printed, from the torch.profiler captures (their operators carry shapes):

1. **GEMMs**, paired by shape (the sorted M, K, N: a Linear's forward, input-gradient and
   weight-gradient GEMMs share it): 16-bit and FP8 kernel time per call, and the least-squares
   line ``fp8 = fixed + rate x bf16`` over the pairs. The rule's ``FP8_GEMM_FIXED_NS`` and
   ``FP8_GEMM_RATE`` are this line.
2. **Cast kernels** of the scenario captures (standalone there: the amax reduction, the
   single-block scale kernel, the fused scale/cast/transpose), each with the bytes its
   operator's tensors hold (inputs read, FP8 outputs written): the line ``time = floor + bytes /
   bandwidth`` over the kernels that move data, and the scale kernels' time (a pure floor). The
   rule's ``CAST_KERNEL_FLOOR_NS``, ``CAST_KERNELS_PER_GEMM`` and ``CAST_BYTES_PER_NS`` are these.
3. **The wide GPT's FP8 kernels** (its casts fused into Inductor's neighbouring kernels): count
   and time per step of every kernel that computes an amax or a scaled cast, against the casts
   modelled from its GEMMs' shapes (6 B per element, the scenario's single pass; 8 B, the
   rule's count for torchao's recipe), and against what its steps leave for them (the GEMMs'
   kernel saving less the measured gain of FP8 + compile over compile alone,
   fixtures/public/measured.json): the check that the per-element bytes fit a fully compiled
   torchao model.

    PYTHONPATH=. python benchmarks/fp8_kernel_costs.py
    PYTHONPATH=. python benchmarks/fp8_kernel_costs.py --estimates [TRACE ...]

``--estimates`` prints, per trace (fixtures/-relative; default: the FP8 routes measured and the
healthy steps FP8 measured slower on), what the rule's per-GEMM model gives: the candidate
GEMMs, how many had recorded shapes, how many pay, the net saving a step, and the gain over the
route's baseline without the 1.02 threshold (1.000 where the net is no saving).
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from advisor.analysis import analyze  # noqa: E402
from advisor.graph.flops import ITEMSIZE  # noqa: E402
from advisor.graph.gemm_shapes import gemm_sizes, operator_name  # noqa: E402
from advisor.graph.kernels import KernelCategory, classify, input_shapes, op_precision  # noqa: E402
from advisor.graph.model import GpuOp, GpuOpKind, OpGraph  # noqa: E402
from advisor.graph.queries import steps_ops  # noqa: E402

FIXTURES = ROOT / "fixtures"
PAIRS = (  # name, 16-bit capture, FP8 capture
    ("fp8-candidate fit", "scenarios/fp8-candidate/bad/trace.json.gz",
     "scenarios/fp8-candidate/good/trace.json.gz"),
    ("fp8-candidate check", "scenarios-check/fp8-candidate/bad/trace.json.gz",
     "scenarios-check/fp8-candidate/good/trace.json.gz"),
    ("planted wide GPT", "public/planted-gpt-routes/trace.json.gz",
     "public/planted-gpt-routes/trace_wide-fp8-compile.json.gz"),
)
GEMM_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_addmm_activation",
            "aten::_scaled_mm")
AMAX = re.compile(r"amax|abs_.*max|max_.*abs", re.I)
SCALED_CAST = re.compile(r"_scaled_mm|clamp.*reciprocal|reciprocal.*clamp", re.I)
"""An FP8 cast kernel's name (Inductor's): an absolute maximum (the amax), or the scale's
reciprocal with the clamp to the FP8 range (the scale and the cast)."""
SMALL_KERNEL_NS = 10_000
"""Cast kernels shorter than this move no tensor (the scale from the amax's partial maxima):
their time is the per-kernel floor."""


def _steps_kernels(path: Path) -> tuple[OpGraph, list[GpuOp], int]:
    a = analyze(path)
    steps = a.context.steps
    ops = [o for o in steps_ops(a.graph, steps) if o.kind is GpuOpKind.KERNEL]
    return a.graph, ops, len(steps)


def _operator(graph: OpGraph, op: GpuOp, names: tuple[str, ...] | None = None):
    """The innermost range at ``op``'s launch named one of ``names`` (or the kernel itself:
    Inductor records each Triton launch as an operator with its tensors)."""
    call = graph.launcher(op)
    if call is None:
        return None
    for r in reversed(graph.ranges_at(call.pid, call.tid, call.start_ns)):
        if (names and operator_name(r.name) in names) or (not names and r.name == op.name):
            return r
    return None


def _bytes(r) -> float | None:
    """What the operator's tensors hold (each read or written once): its traffic."""
    shapes, dtypes = input_shapes(r), r.dtypes or ()
    if not shapes:
        return None
    total = 0.0
    for i, s in enumerate(shapes):
        if not (isinstance(s, tuple) and s and all(isinstance(d, int) for d in s)):
            continue
        n = 1
        for d in s:
            n *= d
        t = str(dtypes[i]).lower() if i < len(dtypes) else ""
        total += n * ITEMSIZE.get(t, 2)
    return total


def _gemm_sizes(graph: OpGraph, op: GpuOp) -> tuple[int, int, int] | None:
    """M, K, N of the GEMM operator that launched ``op``: ``_scaled_mm``'s first two inputs
    (its recorded inputs end with the output buffer), the others' last two."""
    r = _operator(graph, op, GEMM_OPS)
    shapes = input_shapes(r) if r is not None else None
    if not shapes:
        return None
    if operator_name(r.name) == "aten::_scaled_mm":
        return gemm_sizes(shapes[:2])
    return gemm_sizes(shapes)


def gemm_table(pair: tuple[str, str, str]) -> list[tuple[str, tuple[int, ...], int, float, int, float]]:
    """Per GEMM shape (sorted M, K, N): 16-bit calls per step and mean ns, FP8 the same."""
    name, bf16, fp8 = pair
    out: dict[tuple[int, ...], dict[str, list[int]]] = defaultdict(lambda: {"16": [], "8": []})
    steps_of = {}
    for which, rel in (("16", bf16), ("8", fp8)):
        graph, ops, n = _steps_kernels(FIXTURES / rel)
        steps_of[which] = n
        for o in ops:
            if classify(o) is not KernelCategory.GEMM or "splitKreduce" in o.name:
                continue
            prec = op_precision(graph, o)
            if (which == "16") != (prec == "fp16/bf16") and not (which == "8" and prec == "fp8"):
                continue
            sizes = _gemm_sizes(graph, o)
            if sizes is not None:
                out[tuple(sorted(sizes))][which].append(o.duration_ns)
    rows = []
    for key, got in sorted(out.items()):
        if got["16"] and got["8"]:
            rows.append((name, key, len(got["16"]) // steps_of["16"], statistics.fmean(got["16"]),
                         len(got["8"]) // steps_of["8"], statistics.fmean(got["8"])))
    return rows


def line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least squares y = a + b x."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


def cast_kernels(rel: str) -> list[tuple[str, float | None, int]]:
    """(name, bytes, ns) of every FP8 cast kernel of a capture's steps."""
    graph, ops, _ = _steps_kernels(FIXTURES / rel)
    out = []
    for o in ops:
        if classify(o) is KernelCategory.GEMM or not (AMAX.search(o.name) or SCALED_CAST.search(o.name)):
            continue
        r = _operator(graph, o)
        out.append((o.name, _bytes(r) if r is not None else None, o.duration_ns))
    return out


def main() -> None:
    print("1. GEMMs by shape: 16-bit against FP8 (kernel time per call, H100)\n")
    print(f"{'capture':22s} {'sorted M,K,N':>22s} {'n16':>4s} {'bf16 us':>9s} {'n8':>4s} "
          f"{'fp8 us':>9s} {'fp8/bf16':>8s}")
    rows = [r for p in PAIRS for r in gemm_table(p)]
    for name, key, n16, t16, n8, t8 in rows:
        print(f"{name:22s} {key!s:>22s} {n16:4d} {t16 / 1e3:9.1f} {n8:4d} {t8 / 1e3:9.1f} "
              f"{t8 / t16:8.3f}")
    a, b = line([r[3] for r in rows], [r[5] for r in rows])
    print(f"\nfp8 = {a / 1e3:.1f} us + {b:.3f} x bf16 (least squares over the {len(rows)} shapes)")
    for name, key, _, t16, _, t8 in rows:
        print(f"  {name:22s} {key!s:>22s} model {(a + b * t16) / 1e3:7.1f} us, "
              f"measured {t8 / 1e3:7.1f} us ({(a + b * t16) / t8 - 1:+.1%})")

    print("\n2. The scenario captures' cast kernels (standalone): bytes moved and time\n")
    moving, floors = [], []
    for rel in (p[2] for p in PAIRS[:2]):
        kernels = cast_kernels(rel)
        by: dict[tuple[str, float | None], list[int]] = defaultdict(list)
        for k, nbytes, ns in kernels:
            by[(k, nbytes)].append(ns)
        for (k, nbytes), times in sorted(by.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0)):
            t = statistics.median(times)
            mb = f"{nbytes / 1e6:9.1f}" if nbytes else "        ?"
            print(f"  {rel.split('/')[0]:15s} {k[:58]:58s} {len(times):4d} x {mb} MB "
                  f"{t / 1e3:8.1f} us" + (f" {nbytes / t:6.0f} B/ns" if nbytes else ""))
        for _k, nbytes, ns in kernels:
            if ns < SMALL_KERNEL_NS:
                floors.append(ns)
            elif nbytes:
                moving.append((nbytes, ns))
    f0, per_byte = line([m[0] for m in moving], [m[1] for m in moving])
    floor = statistics.median(floors)
    print(f"\ndata-moving casts: time = {f0 / 1e3:.1f} us + bytes / {1 / per_byte:.0f} B/ns "
          f"({len(moving)} kernels); scale kernels: median {floor / 1e3:.2f} us ({len(floors)})")
    print("per cast operand: amax + scale + cast/transpose = 3 kernels; per GEMM: one operand "
          "(a Linear's 3 GEMMs cast x, w and dy)")

    print("\n3. The wide GPT's FP8 kernels (casts fused by Inductor), per step\n")
    graph, ops, n = _steps_kernels(FIXTURES / PAIRS[2][2])
    casts = [o for o in ops if classify(o) is not KernelCategory.GEMM
             and (AMAX.search(o.name) or SCALED_CAST.search(o.name))]
    fp8 = [o for o in ops if classify(o) is KernelCategory.GEMM and op_precision(graph, o) == "fp8"]
    out_elems = 0.0
    for o in fp8:
        sizes = _gemm_sizes(graph, o)
        if sizes:
            out_elems += sizes[0] * sizes[2]
    print(f"  {len(fp8) / n:.0f} FP8 GEMMs, {len(casts) / n:.0f} kernels computing an amax or a "
          f"scaled cast, {sum(o.duration_ns for o in casts) / n / 1e6:.2f} ms (every such kernel, "
          f"with the layer norms, GELUs and adds Inductor fused into them)")
    floors_ns = len(fp8) * 3 * floor / n
    for per_element in (6, 8):
        modelled = floors_ns + out_elems / n * per_element * per_byte
        print(f"  modelled casts: {len(fp8) / n:.0f} GEMMs x (3 x {floor / 1e3:.1f} us + their "
              f"output's elements x {per_element} B at {1 / per_byte:.0f} B/ns) = "
              f"{modelled / 1e6:.2f} ms")
    wide = [r for r in rows if r[0] == PAIRS[2][0]]
    saved = sum(n16 * t16 - n8 * t8 for _, _, n16, t16, n8, t8 in wide)
    step = json.loads((FIXTURES / "public" / "measured.json").read_text())
    ms = step["planted-gpt-routes"]["step_ms"]
    gain = (ms["wide-compile"] - ms["wide-fp8-compile"]) * 1e6
    added = saved - gain
    print(f"  against the steps: its GEMMs' kernel saving {saved / 1e6:.2f} ms less its measured "
          f"gain over compile alone ({ms['wide-compile']:.2f} -> {ms['wide-fp8-compile']:.2f} ms: "
          f"{gain / 1e6:.2f} ms) leaves {added / 1e6:.2f} ms of FP8's added work a step: "
          f"{(added - floors_ns) / per_byte / (out_elems / n):.1f} B per output element at "
          f"{1 / per_byte:.0f} B/ns once the kernels' floors are out")


ESTIMATED = (
    "scenarios/fp8-candidate/bad/nsys.sqlite.gz", "scenarios/fp8-candidate/bad/trace.json.gz",
    "scenarios-check/fp8-candidate/bad/nsys.sqlite.gz",
    "scenarios-check/fp8-candidate/bad/trace.json.gz",
    "public/planted-gpt-routes/nsys.sqlite.gz", "public/planted-gpt-routes/trace.json.gz",
    "scenarios/compiler-fusion/bad/nsys.sqlite.gz", "scenarios/compiler-fusion/bad/trace.json.gz",
    "scenarios-check/rng-bound-dropout/good/nsys.sqlite.gz",
    "scenarios-check/rng-bound-dropout/good/trace.json.gz",
    "scenarios-check/fp32-matmul/good/nsys.sqlite.gz", "scenarios/fp32-matmul/good/nsys.sqlite.gz",
    "scenarios/fp32-matmul/good/trace.json.gz", "scenarios/pageable-memcpy/good/nsys.sqlite.gz",
    "scenarios/pageable-memcpy/good/nsys_repeat.sqlite.gz",
    "scenarios/pageable-memcpy/good/trace.json.gz",
)


def estimates(traces: list[str]) -> None:
    """The rule's per-GEMM model on each trace, threshold lifted (see the module's docstring)."""
    try:  # the wheel mounts rules/ as advisor.rules (setup.py)
        import advisor.rules.fp8_candidate as rule
    except ImportError:
        import rules.fp8_candidate as rule
    from advisor.engine.gpus import trace_gpu

    rule.MIN_GAIN = 0.0
    for rel in traces:
        a = analyze(FIXTURES / rel)
        graph, steps = a.graph, a.context.steps
        n = len(steps)
        ops = [o for o in steps_ops(graph, steps) if o.kind is GpuOpKind.KERNEL]
        gpu = trace_gpu(graph, (o.name for o in ops[:20000]))
        gemms = [o for o in ops if classify(o) is KernelCategory.GEMM
                 and op_precision(graph, o) == "fp16/bf16" and o.duration_ns >= rule.FP8_MIN_GEMM_NS]
        head = rule._run_once(gemms, n)
        sizes = {o.id: rule._output_elements(graph, o) for o in gemms}
        gemms = [o for o in gemms if sizes[o.id] != rule.NOT_CONVERTED and o.id not in head]
        factor = rule._gemm_factor(gpu)
        saving = [o.duration_ns * (1 - factor) - rule._cast_ns(o.duration_ns, gpu, sizes[o.id])
                  for o in gemms]
        found = [f for f in a.results.findings + a.results.below_threshold
                 if f.rule == rule.Fp8Candidate.name]
        gain = found[0].evidence.quantities["gain_over_route_baseline"] if found else 1.0
        shaped = sum(sizes[o.id] is not None for o in gemms)
        print(f"{rel:52s} {len(gemms) / n:5.1f} GEMMs/step (shapes {shaped}/{len(gemms)}), "
              f"{sum(x > 0 for x in saving) / n:5.1f} pay; net {sum(saving) / n / 1e3:+8.1f} us/step; "
              f"gain over the route's baseline {gain:.3f}")


if __name__ == "__main__":
    if "--estimates" in sys.argv:
        estimates([a for a in sys.argv[1:] if a != "--estimates"] or list(ESTIMATED))
    else:
        main()
