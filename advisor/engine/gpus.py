"""Throughput of the GPU a trace was taken on, keyed by its name and compute capability.

The precision rules' estimates are ratios of one GPU's own rates (FP32 on CUDA cores against
16-bit or FP8 on tensor cores) and their fixes depend on what the GPU has: a V100 has no bf16,
no TF32 and no FP8; an A100 has no FP8. Both trace formats carry the device's name and compute
capability (nsys ``TARGET_INFO_GPU``, Kineto ``deviceProperties``); the capability arrives as
``"9.0"``, ``"90"``, ``"sm_90"`` or ``(9, 0)``, all read the same way (`parse_capability`).

Rates are the vendor's dense datasheet figures (TFLOP/s, no sparsity; GB/s of HBM/GDDR), for
the SXM part where several exist. A name match wins over the capability (an H100 PCIe and an
H100 SXM share 9.0 but not their clocks); the capability is the fallback for unnamed or unknown
NVIDIA parts. Other vendors' devices (ROCm traces also report a "compute capability") get no
spec: the rules then stay silent rather than apply an NVIDIA ratio.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from advisor.graph.model import OpGraph


@dataclass(frozen=True)
class GpuSpec:
    name: str
    capability: tuple[int, int]
    fp32: float  # TFLOP/s on CUDA cores
    fp16: float  # TFLOP/s, tensor cores, dense
    bf16: float | None  # None: no bf16 tensor cores (Volta, Turing)
    tf32: float | None  # None: no TF32 (before Ampere)
    fp8: float | None  # None: no FP8 tensor cores (before Ada/Hopper)
    bandwidth_gbs: float
    measured_fp32_to_16bit: float | None = None  # a GEMM ratio measured on this GPU, if any
    # What a 16-bit GEMM whose sizes are not multiples of 8 gains over FP32: cuBLAS runs it on
    # low-alignment kernels at about the 16-bit non-tensor rate, taken from the datasheets: 2x
    # FP32 on Volta, Turing, Ada and Hopper (H100 whitepaper: 133.8 vs 66.9 TFLOP/s), 4x on A100
    # (78 vs 19.5). Measured on the H100: 2.4x (rules/fp32_matmul.py, TENSOR_CORE_MULTIPLE).
    half_simt_ratio: float = 2.0

    @property
    def half_dtype(self) -> str:
        """The 16-bit autocast dtype to recommend: bf16 where it exists (no loss scaling)."""
        return "bfloat16" if self.bf16 else "float16"

    @property
    def half_rate(self) -> float:
        return self.bf16 or self.fp16

    @property
    def fp32_to_16bit(self) -> float:
        """FP32 GEMM time over the same GEMM on 16-bit tensor cores."""
        return self.measured_fp32_to_16bit or self.half_rate / self.fp32

    @property
    def fp32_to_tf32(self) -> float | None:
        return self.tf32 / self.fp32 if self.tf32 else None

    @property
    def tf32_to_16bit(self) -> float | None:
        """TF32 GEMM time over the same GEMM in 16 bits, both on tensor cores (H100: 989 / 495,
        2.0): what autocast gains on a GEMM or convolution that already ran in TF32."""
        return self.half_rate / self.tf32 if self.tf32 else None

    @property
    def has_fp8(self) -> bool:
        return self.fp8 is not None


# (name pattern, spec). Most specific patterns first: "H100 PCIe" before "H100".
_SPECS: list[tuple[re.Pattern[str], GpuSpec]] = [
    (re.compile(p, re.I), s) for p, s in [
        (r"V100", GpuSpec("V100", (7, 0), 15.7, 125, None, None, None, 900)),
        (r"\bT4\b", GpuSpec("T4", (7, 5), 8.1, 65, None, None, None, 320)),
        (r"A100", GpuSpec("A100", (8, 0), 19.5, 312, 312, 156, None, 2039,
                                   half_simt_ratio=4.0)),
        (r"\bA10G?\b", GpuSpec("A10", (8, 6), 31.2, 125, 125, 62.5, None, 600)),
        (r"RTX 30\d0|RTX A\d000", GpuSpec("RTX 30/A series", (8, 6), 29.8, 119, 119, 59.5, None, 760)),
        (r"L40S", GpuSpec("L40S", (8, 9), 91.6, 362, 362, 183, 733, 864)),
        (r"\bL4\b", GpuSpec("L4", (8, 9), 30.3, 121, 121, 60, 242, 300)),
        (r"RTX 40\d0", GpuSpec("RTX 40 series", (8, 9), 40.0, 165, 165, 82.6, 330, 500)),
        (r"H[18]00.*PCIe", GpuSpec("H100 PCIe", (9, 0), 51, 756, 756, 378, 1513, 2000)),
        # H100 NVL datasheet: 60 TFLOP/s FP32, the tensor-core figures "with sparsity" halved
        (r"H100.*NVL", GpuSpec("H100 NVL", (9, 0), 60, 835.5, 835.5, 417.5, 1670.5, 3900)),
        # measured: fp32-matmul scenario, 48.26 ms of FP32 GEMMs against 3.11 ms of BF16 (15.5x);
        # the datasheet ratio 989/67 = 14.8 is kept as the conservative one. GH200 is matched
        # here, before "H200" (which its name contains): its GPU is an H100's.
        (r"H100|H800|GH200", GpuSpec("H100 SXM", (9, 0), 67, 989, 989, 495, 1979, 3350, 14.8)),
        (r"H200", GpuSpec("H200", (9, 0), 67, 989, 989, 495, 1979, 4800, 14.8)),
        # the H20 is a cut-down Hopper, not an H200: 44/74/148/296 TFLOP/s FP32/TF32/16-bit/FP8,
        # 4,000 GB/s (NVIDIA HGX H20 datasheet); "H20\b" does not match "H200" (no word break
        # between the zeros), so this pattern cannot take an H200 either
        (r"H20\b", GpuSpec("H20", (9, 0), 44, 148, 148, 74, 296, 4000)),
        (r"B200|GB200", GpuSpec("B200", (10, 0), 80, 2250, 2250, 1100, 4500, 8000)),
    ]
]
_BY_CAPABILITY: dict[tuple[int, int], GpuSpec] = {}
for _, _spec in _SPECS:
    _BY_CAPABILITY.setdefault(_spec.capability, _spec)
_BY_CAPABILITY[(8, 6)] = next(s for _, s in _SPECS if s.name == "A10")


def parse_capability(value: object) -> tuple[int, int] | None:
    """``"9.0"``, ``"9"``, ``"90"``, ``"sm_90"``, ``"sm90a"``, ``(9, 0)`` -> ``(9, 0)``."""
    if value is None:
        return None
    if isinstance(value, tuple | list) and len(value) >= 2:
        return int(value[0]), int(value[1])
    s = str(value).strip().lower()
    m = re.fullmatch(r"(\d+)\.(\d+)", s)
    if m:
        return int(m.group(1)), int(m.group(2))
    m = re.fullmatch(r"(?:sm_?|compute_?)?(\d{1,2})(\d)[a-z]?", s)
    if m:
        return int(m.group(1)), int(m.group(2))
    m = re.fullmatch(r"(\d+)", s)
    return (int(m.group(1)), 0) if m else None


def lookup(name: str | None, capability: object = None) -> GpuSpec | None:
    """The spec of one device: by name, else (NVIDIA or unnamed devices) by capability."""
    if name:
        for pattern, spec in _SPECS:
            if pattern.search(name):
                return spec
        if not re.search(r"nvidia|tesla|quadro|geforce|rtx|titan", name, re.I):
            return None  # another vendor's device (its "capability" is not NVIDIA's)
    cap = parse_capability(capability)
    return _BY_CAPABILITY.get(cap) if cap else None


ARCH_SPECIFIC_FROM = 90
"""Kernel-name architecture tags from which on a tag names the GPU's own architecture: Hopper's
cuBLAS/CUTLASS kernels (``sm90_xmma_gemm_*``, ``sm90a``) use wgmma and TMA and run on Hopper only.
Older tags do not: an H100 runs cuBLAS's ``sm80_xmma_gemm_f32f32_*`` and CUTLASS's
``cutlass_80_simt_sgemm_*`` for FP32 GEMMs (fixtures/public/lightning-vit-b), so a trace whose
newest tag is sm80 may come from an A100, an A10, an L4 or an H100."""


def trace_gpu(graph: OpGraph, kernel_names: Iterable[str] = ()) -> GpuSpec | None:
    """The spec of the GPU the trace ran on (the first device it names), or, for traces that
    name none, from an architecture-specific tag (``sm90``) in cuBLAS/CUTLASS kernel names; None
    when neither says which GPU it was (callers choose their own default or stay silent)."""
    for g in graph.info.gpus:
        spec = lookup(g.name, g.compute_capability)
        if spec is not None or g.name:
            return spec
    # a GPU runs kernels built for its architecture or older ones: the newest tag seen is a
    # lower bound, and names the GPU only where such kernels run on that architecture alone
    tags = [int(m.group(1)) for n in kernel_names for m in re.finditer(r"sm_?(\d{2,3})[a-z]?_", n)]
    newest = max(tags, default=0)
    return lookup(None, str(newest)) if newest >= ARCH_SPECIFIC_FROM else None
