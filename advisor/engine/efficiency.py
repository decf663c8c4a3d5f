"""How well the step uses the GPU: each kernel against its roof, the step's MFU, tensor-core use.

The question a performance engineer asks of a GPU-bound step is how far each kernel is from the
GPU's peak and which peak binds it. For every kernel of the analysed steps whose launching
operator recorded its inputs, `advisor.graph.flops` gives FLOPs and minimum bytes; this module
divides them by the kernels' time and places them on the roofline of the trace's GPU:

* peaks are the dense datasheet figures of `advisor.engine.gpus` (no sparsity), per datatype
  of the kernel (`advisor.graph.kernels.op_precision`: the kernel's name first): H100 SXM5
  989/495/67/1979 TFLOP/s BF16-FP16/TF32/FP32/FP8 and 3,350 GB/s (NVIDIA H100 Tensor Core GPU
  datasheet, the "with sparsity" figures halved); H100 PCIe 756/378/51/1513, 2,000 GB/s (same
  datasheet); H200 the H100 SXM's compute with 4,800 GB/s (H200 datasheet); H20 (a cut-down
  Hopper, not an H200) 148/74/44/296, 4,000 GB/s (HGX H20 datasheet); A100 SXM 80GB
  312/156/19.5, no FP8, 2,039 GB/s (A100 datasheet); B200 2,250/1,100/80/4,500, 8,000 GB/s
  (HGX B200 datasheet, per GPU, dense). The GPU comes from the trace (nsys TARGET_INFO_GPU,
  Kineto deviceProperties); an unknown one gets no peaks and no roofline, never a default.
* the ridge point is peak FLOP/s over peak bytes/s: a kernel whose arithmetic intensity
  (FLOPs per byte) is below it is memory-bound, its roof is intensity x bandwidth; above, its
  roof is the datatype's peak. Memory-bound operators (no FLOPs counted) are judged against
  bandwidth alone. Their bytes are the minimum HBM traffic, but operands a previous kernel left
  in the L2 cache (50 MB on an H100) are read from there: such a kernel can sit slightly above
  its HBM roof (HF GPT-2's residual ``add_`` of 25 MB operands: 1.10x).
* MFU is the model FLOPs of one step (GEMMs and attention, recomputation not counted) over
  the report's baseline step time and the peak of the datatype that carries most of them.
  Kernels whose FLOPs cannot be known are left out and their share of GEMM/attention time is
  reported (`flops_coverage`): the MFU is then a lower bound, never filled in by a guess.
* tensor-core share: of the steps' GEMM kernel time, the share in kernels whose names say
  they run on tensor cores (wgmma/xmma/tensorop/nvjet, 16-bit, TF32 or FP8 datatypes) against
  CUDA-core kernels (sgemm, SIMT, gemv, FP32 datatypes).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from advisor.engine.gpus import GpuSpec, lookup
from advisor.graph.flops import PRECISION_ITEMSIZE, Work, operator_work
from advisor.graph.kernels import (
    KernelCategory,
    classify,
    input_shapes,
    launching_op,
    op_precision,
    short_name,
)
from advisor.graph.model import CpuRange, GpuOp, OpGraph, Step
from advisor.graph.probe_work import NO_PROBE, ProbeSizes, probe_work
from advisor.graph.queries import steps_ops

_TENSOR_CORE = re.compile(r"wgmma|gmma|xmma|tensorop|nvjet|hmma|imma|qmma|_h884|h1688|s1688"
                          r"|s16816|h16816|i16832|cutlass_80_tensorop|sm90_", re.I)
_CUDA_CORE = re.compile(r"sgemm|simt|gemv|gemmSN|ffma|dot_kernel", re.I)


def peak_tflops(spec: GpuSpec, precision: str) -> float | None:
    """The dense peak of one datatype on this GPU (None: the GPU has no such units)."""
    return {"fp16/bf16": spec.half_rate, "tf32": spec.tf32, "fp32": spec.fp32,
            "fp8": spec.fp8}.get(precision)


@lru_cache(maxsize=65536)  # pure in its arguments; a window repeats few kernel names (issue #39)
def tensor_core(name: str, precision: str) -> bool | None:
    """Whether a GEMM kernel runs on tensor cores, from its name; None when it cannot tell."""
    if _CUDA_CORE.search(name) or precision in ("fp32", "fp64"):
        return False
    if _TENSOR_CORE.search(name) or precision in ("fp16/bf16", "tf32", "fp8", "int8"):
        return True
    return None


@dataclass(frozen=True)
class KernelEfficiency:
    """One operator configuration (operator, sizes, kernel, datatype) over the analysed steps."""

    kernel: str
    op: str
    category: str
    precision: str
    sizes: tuple[int, ...] | None
    launches: int
    time_ns: int
    flops: float | None
    bytes: float | None
    peak_tflops: float | None
    peak_gbs: float | None
    reason: str = ""
    op_ids: tuple[int, ...] = ()  # the kernels (GpuOp ids), for effects on them

    @property
    def tflops(self) -> float | None:
        return self.flops / self.time_ns / 1e3 if self.flops and self.time_ns else None

    @property
    def gbs(self) -> float | None:
        return self.bytes / self.time_ns if self.bytes and self.time_ns else None

    @property
    def intensity(self) -> float | None:
        """FLOPs per byte of minimum traffic."""
        return self.flops / self.bytes if self.flops and self.bytes else None

    @property
    def bound(self) -> str | None:
        """"compute" or "memory" on this GPU's roofline; None without peaks or work."""
        if self.peak_gbs is None:
            return None
        if self.flops is None:
            return "memory" if self.bytes else None
        if self.intensity is None or self.peak_tflops is None:
            return None
        ridge = self.peak_tflops * 1e3 / self.peak_gbs  # FLOP per byte
        return "compute" if self.intensity >= ridge else "memory"

    @property
    def of_roof(self) -> float | None:
        """Achieved over the roof at this kernel's intensity (1.0: on the roof)."""
        bound = self.bound
        if bound is None:
            return None
        if self.flops is None:
            return self.gbs / self.peak_gbs if self.gbs and self.peak_gbs else None
        if bound == "compute":
            return self.tflops / self.peak_tflops if self.tflops and self.peak_tflops else None
        roof = (self.intensity or 0.0) * (self.peak_gbs or 0.0) / 1e3  # TFLOP/s
        return self.tflops / roof if self.tflops and roof else None

    def to_dict(self) -> dict:
        def r(x: float | None, n: int = 3) -> float | None:
            return None if x is None else round(x, n)

        return {"kernel": self.kernel, "op": self.op, "category": self.category,
                "precision": self.precision, "sizes": list(self.sizes) if self.sizes else None,
                "launches": self.launches, "time_ms": r(self.time_ns / 1e6, 4),
                "flops": self.flops, "bytes": self.bytes, "tflops": r(self.tflops),
                "gbs": r(self.gbs, 1), "intensity": r(self.intensity, 2), "bound": self.bound,
                "of_roof": r(self.of_roof), "reason": self.reason or None}


@dataclass(frozen=True)
class StepEfficiency:
    """The step's use of the GPU: MFU, tensor-core share, each kernel against its roof."""

    gpu: str | None  # the spec's name (None: unknown GPU: no peaks)
    peak_gbs: float | None
    steps: int
    step_ns: float | None
    model_flops_per_step: float
    precision: str | None  # the datatype carrying most model FLOPs
    peak_tflops: float | None
    flops_coverage: float | None  # share of GEMM+attention kernel time with known FLOPs
    gemm_ns_per_step: float
    tensor_core_share: float | None  # of GEMM time; None without GEMMs
    kernels: tuple[KernelEfficiency, ...]
    reason: str = ""  # why there is no MFU
    # GEMM/attention kernel time without FLOPs, per step: (category, why, ns), longest first
    uncovered: tuple[tuple[str, str, float], ...] = ()

    @property
    def mfu(self) -> float | None:
        if not (self.peak_tflops and self.step_ns and self.model_flops_per_step):
            return None
        return self.model_flops_per_step / (self.step_ns / 1e9) / (self.peak_tflops * 1e12)

    @property
    def mfu_lower_bound(self) -> bool | None:
        """Whether the MFU leaves out GEMM or attention time whose FLOPs are unknown (then it
        is a lower bound, never topped up by a guess); None without an MFU."""
        if self.mfu is None:
            return None
        return (self.flops_coverage or 0.0) < COVERED

    def mfu_text(self, digits: int = 1, peak: bool = False) -> str:
        """"MFU 25.7%", or "MFU >= 25.7% (shapes cover 79% of GEMM/attention time)": what every
        view says of the MFU, so none of them reads a lower bound as the step's figure;
        ``peak``: name the peak after the figure ("of H100 SXM fp16/bf16 989 TFLOP/s")."""
        if self.mfu is None:
            return f"MFU unknown ({self.reason})"
        of = (f" of {self.gpu} {self.precision} {self.peak_tflops:.0f} TFLOP/s"
              if peak and self.peak_tflops else "")
        if not self.mfu_lower_bound:
            return f"MFU {self.mfu:.{digits}%}{of}"
        return (f"MFU >= {self.mfu:.{digits}%}{of} (shapes cover "
                f"{self.flops_coverage or 0:.0%} of GEMM/attention time)")

    def furthest_below(self, n: int = 10, min_share: float = 0.005) -> list[KernelEfficiency]:
        """The kernels with the most time lost against their roof (time x (1 - of_roof))."""
        total = sum(k.time_ns for k in self.kernels) or 1
        placed = [k for k in self.kernels if k.of_roof is not None
                  and k.time_ns / total >= min_share]
        return sorted(placed, key=lambda k: -k.time_ns * (1 - min(k.of_roof or 0, 1)))[:n]

    def to_dict(self) -> dict:
        mfu = self.mfu
        return {
            "gpu": self.gpu, "peak_tflops": self.peak_tflops, "peak_gbs": self.peak_gbs,
            "precision": self.precision,
            "model_flops_per_step": self.model_flops_per_step,
            "mfu": None if mfu is None else round(mfu, 4),
            "flops_coverage": None if self.flops_coverage is None else round(self.flops_coverage, 4),
            "mfu_lower_bound": self.mfu_lower_bound,
            "mfu_text": self.mfu_text(),
            "uncovered": [{"category": c, "reason": why, "ms_per_step": round(ns / 1e6, 4)}
                          for c, why, ns in self.uncovered],
            "gemm_ms_per_step": round(self.gemm_ns_per_step / 1e6, 4),
            "tensor_core_share": (None if self.tensor_core_share is None
                                  else round(self.tensor_core_share, 4)),
            "reason": self.reason or None,
            "kernels": [k.to_dict() for k in self.furthest_below(20)],
            # the 30 longest kernels with FLOPs: the HTML roofline's points
            "roofline": [k.to_dict() for k in sorted(
                (k for k in self.kernels if k.intensity is not None and k.bound),
                key=lambda k: -k.time_ns)[:30]],
        }


_COMPUTE = (KernelCategory.GEMM, KernelCategory.ATTENTION)
COVERED = 0.995
"""FLOPs known for this share of GEMM/attention time: the MFU is the step's, not a bound."""


def _unknown_reason(graph: OpGraph, op: GpuOp, work: Work | None) -> str:
    """Why a GEMM or attention kernel has no FLOPs, in the words a report shows."""
    if work is not None:
        return work.reason or "FLOPs unknown"
    if not graph.probe_gemm_sizes:
        return "no operator range around its launch"
    if classify(op) is KernelCategory.ATTENTION:
        return "no operator range around its launch; the shape probe sizes GEMMs only"
    return ("the shape probe did not size it (signature not probed, or sizes of different "
            "work at about its duration)")


def _work(graph: OpGraph, op: GpuOp, precision: str,
          probe: ProbeSizes = NO_PROBE) -> tuple[int | None, Work | None]:
    """The id of the operator instance that launched ``op`` and its work. Without operator
    ranges (nsys), a GEMM kernel the shape probe sizes (`advisor.graph.probe_work`) is its own instance,
    with its split-K reduction kernel if it has one; under an operator range without shapes
    (nsys ``--pytorch=autograd-nvtx``) the probe's sizes stand for the range's."""
    r = launching_op(graph, op)
    shapes = input_shapes(r) if r is not None else None
    if not shapes:
        if classify(op) is KernelCategory.GEMM:
            work = probe_work(graph, op, PRECISION_ITEMSIZE.get(precision), probe)
            if work is not None:
                return (-1 - probe.partners.get(op.id, op.id) if r is None else r.id), work
        if r is None:
            return None, None
    return r.id, _operator_work(graph, r, shapes, PRECISION_ITEMSIZE.get(precision))


def _operator_work(graph: OpGraph, r: CpuRange, shapes: tuple | None,
                   itemsize: int | None) -> Work:
    """`operator_work`, kept on the graph for ranges of the same operator, input shapes and
    dtypes, scalar inputs and item size: each step of the window runs the same operators on the
    same shapes (a twentieth of the rule pass on HTA's trace_diff/test; issue #39). The key
    names the shapes and dtypes objects, which the entry holds: the Kineto reader makes one
    tuple per distinct text of them, and an equal-comparing tuple of other element types
    (``(True,)`` and ``(1,)``) would not do the same work."""
    memo = graph.__dict__.setdefault("_operator_works", {})
    key = (r.name, id(shapes), id(r.dtypes), r.concrete, itemsize)
    found = memo.get(key)
    if found is None:
        found = memo[key] = (shapes, r.dtypes, operator_work(r, shapes, itemsize))
    return found[2]


_Works = dict[tuple[int, str], tuple[GpuOp, int | None, Work | None]]


def _work_memo(works: _Works, graph: OpGraph, op: GpuOp, precision: str,
               probe: ProbeSizes) -> tuple[int | None, Work | None]:
    """`_work` through ``works`` (`_works`), keyed by the op object itself: the entry holds
    the op, so its ``id()`` names no other op while the memo lives (op ids of a hand-built
    graph need not be unique)."""
    key = (id(op), precision)
    found = works.get(key)
    if found is None:
        found = works[key] = (op, *_work(graph, op, precision, probe))
    return found[1], found[2]


def _probe_key(probe: ProbeSizes) -> tuple:
    """``probe`` as a hashable key of the memos below (empty, hence cheap, without a probe)."""
    return (tuple(sorted(probe.positions.items())), tuple(sorted(probe.partners.items())))


def _works(graph: OpGraph, probe: ProbeSizes) -> _Works:
    """The memo of `_work` on ``graph`` for ``probe``: (op, precision) -> its answer.

    gemm-shape-alignment and the report's step efficiency ask `_work` of every kernel of the
    same steps, and step efficiency asks it again of each GEMM and attention kernel: three
    times a kernel (HTA's df_index_resolver: 0.25 of its 2.2 CPU s; issue #39). The answer is
    pure in the op, its precision and the probe (the graph is not changed once loaded)."""
    memo = graph.__dict__.setdefault("_kernel_works", {})
    key = _probe_key(probe)
    found = memo.get(key)
    if found is None:
        found = memo[key] = {}
    return found


def kernel_efficiency(graph: OpGraph, ops: Sequence[GpuOp], spec: GpuSpec | None,
                      probe: ProbeSizes = NO_PROBE) -> list[KernelEfficiency]:
    """Every kernel configuration of ``ops`` with its work and place on the roofline.

    An operator that launched several kernels (split-K GEMM and its reduction, attention's
    backward passes) is one entry: its work is done by all of them together. ``probe``: what
    an nsys capture's shape probe tells about ``ops``.

    Kept on the graph per (kernels, GPU, probe): gemm-shape-alignment and the report ask it of
    the same steps' kernels (issue #39); the answer is a new list each time, of frozen entries.
    The key names the kernel objects (the entry holds them, as `_work_memo`'s does)."""
    kernels = tuple(op for op in ops if op.kind.value == "kernel")
    memo = graph.__dict__.setdefault("_kernel_efficiency", {})
    key = (tuple(map(id, kernels)), spec, _probe_key(probe))
    found = memo.get(key)
    if found is None:
        found = memo[key] = (kernels, tuple(_kernel_efficiency(graph, kernels, spec, probe)))
    return list(found[1])


def _kernel_efficiency(graph: OpGraph, kernels: Sequence[GpuOp], spec: GpuSpec | None,
                       probe: ProbeSizes) -> list[KernelEfficiency]:
    """`kernel_efficiency` computed (``kernels``: its ops that are kernels)."""
    works = _works(graph, probe)
    by_range: dict[int, list[GpuOp]] = defaultdict(list)
    works_of: dict[int, Work] = {}
    orphans: list[GpuOp] = []
    for op in kernels:
        rid, work = _work_memo(works, graph, op, op_precision(graph, op), probe)
        if rid is None or work is None:
            orphans.append(op)
            continue
        by_range[rid].append(op)
        works_of[rid] = work
    groups: dict[tuple, list] = defaultdict(lambda: [0, 0, 0.0, 0.0, []])
    meta: dict[tuple, tuple] = {}
    for rid, launched in by_range.items():
        work = works_of[rid]
        main = max(launched, key=lambda k: k.duration_ns)
        precision = op_precision(graph, main)
        cat = classify(main).value
        key = (work.op, work.sizes, short_name(main.name, 120), precision, cat)
        g = groups[key]
        g[0] += 1
        g[1] += sum(k.duration_ns for k in launched)
        g[2] = None if work.flops is None or g[2] is None else g[2] + work.flops
        g[3] = None if work.bytes is None or g[3] is None else g[3] + work.bytes
        g[4].extend(k.id for k in launched)
        meta[key] = (work.reason,)
    for op in orphans:
        precision = op_precision(graph, op)
        key = ("", None, short_name(op.name, 120), precision, classify(op).value)
        g = groups[key]
        g[0], g[1], g[2], g[3] = g[0] + 1, g[1] + op.duration_ns, None, None
        g[4].append(op.id)
        meta[key] = ("no operator range around its launch",)
    out = []
    for key, (n, t, flops, moved, ids) in groups.items():
        op_name, sizes, kernel, precision, cat = key
        out.append(KernelEfficiency(
            kernel, op_name, cat, precision, sizes, n, t, flops, moved,
            peak_tflops(spec, precision) if spec else None,
            spec.bandwidth_gbs if spec else None, meta[key][0], tuple(ids)))
    return sorted(out, key=lambda k: -k.time_ns)


def step_efficiency(graph: OpGraph, steps: Sequence[Step],
                    step_ns: float | None) -> StepEfficiency:
    """MFU, tensor-core share and the kernels' roofline over the analysed ``steps``;
    ``step_ns``: the report's baseline step time."""
    gpu = graph.info.gpus[0] if graph.info.gpus else None
    spec = lookup(gpu.name, gpu.compute_capability) if gpu else None
    ops = steps_ops(graph, steps)
    probe = ProbeSizes.of(graph, steps, ops)
    kernels = kernel_efficiency(graph, ops, spec, probe)
    n = max(len(steps), 1)
    by_precision: dict[str, float] = defaultdict(float)
    compute_ns = known_ns = 0
    model = 0.0
    seen: set[int] = set()
    unknown: dict[tuple[str, str], float] = defaultdict(float)
    works = _works(graph, probe)
    for op in ops:
        if op.kind.value != "kernel" or classify(op) not in _COMPUTE:
            continue
        compute_ns += op.duration_ns
        rid, work = _work_memo(works, graph, op, op_precision(graph, op), probe)
        if rid is None or work is None or work.flops is None:
            unknown[(classify(op).value, _unknown_reason(graph, op, work))] += op.duration_ns
        if rid is None or work is None:
            continue
        if work.flops is not None:
            known_ns += op.duration_ns
        if rid in seen:
            continue
        seen.add(rid)
        if work.model_flops:
            model += work.model_flops
            by_precision[op_precision(graph, op)] += work.model_flops
    gemm = [o for o in ops if o.kind.value == "kernel" and classify(o) is KernelCategory.GEMM]
    gemm_ns = sum(o.duration_ns for o in gemm)
    tc_ns = sum(o.duration_ns for o in gemm if tensor_core(o.name, op_precision(graph, o)))
    precision = max(by_precision, key=by_precision.__getitem__) if by_precision else None
    peak = peak_tflops(spec, precision) if spec and precision else None
    reason = ("" if peak and model else
              "the GPU is not in the peaks table" if spec is None else
              "no GEMM or attention operator with recorded shapes" if not model else
              f"the GPU has no {precision} peak")
    return StepEfficiency(
        spec.name if spec else None, spec.bandwidth_gbs if spec else None, len(steps), step_ns,
        model / n, precision, peak, known_ns / compute_ns if compute_ns else None,
        gemm_ns / n, tc_ns / gemm_ns if gemm_ns else None, tuple(kernels), reason,
        tuple((c, why, ns / n) for (c, why), ns in sorted(unknown.items(), key=lambda kv: -kv[1])))
