"""Hardware constants of the what-if models, each with the measurement it comes from.

Only constants that cannot be read off the trace itself live here. Where a trace shows the
quantity (launch latency, copy bandwidth of pinned copies already in it), the rules read it
from the trace instead.
"""

from __future__ import annotations

PINNED_H2D_BYTES_PER_NS = 25.0
"""Host-to-device copy bandwidth from pinned memory, bytes/ns (= GB/s). H100 SXM on PCIe Gen5
x16 moves 25 to 55 GB/s depending on the host; 25 is the conservative end, refined by the
pinned copies measured in fixtures/scenarios/pageable-memcpy/good (see measured.json)."""

FP32_TO_BF16_GEMM_SPEEDUP = 8.0
"""GEMM time in FP32 (no tensor cores) divided by the same GEMM in BF16 on tensor cores, for
GEMMs large enough to be compute-bound. H100 SXM peaks: FP32 67 TFLOP/s vs BF16 dense 989;
achieved ratio measured in fixtures/scenarios/fp32-matmul (bad vs good GEMM kernels)."""

FP32_TO_TF32_GEMM_SPEEDUP = 4.0
"""Same for TF32 tensor cores (``torch.backends.cuda.matmul.allow_tf32 = True``): half the
BF16 rate; the lower bound of the fp32-matmul estimate."""

BF16_TO_FP8_GEMM_FACTOR = 0.62
"""FP8 (e4m3/e5m2, per-tensor scaling) GEMM time plus the cast/amax kernels FP8 adds, divided
by the BF16 GEMM time, for large GEMMs on H100 (fixtures/scenarios/fp8-candidate)."""

MIN_KERNEL_NS = 2_500
"""No kernel finishes faster than this on H100 (launch, ramp-up, tail): the floor of any
kernel a model shrinks."""
