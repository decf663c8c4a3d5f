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

FP32_TO_BF16_GEMM_SPEEDUP = 14.8
"""GEMM time in FP32 on CUDA cores divided by the same GEMM in BF16 on tensor cores: the H100 SXM
peak ratio (989 dense BF16 / 67 FP32 TFLOP/s). Measured on our H100: 48.26 ms of FP32 GEMMs per
step against 3.11 ms of BF16 GEMMs for the same layers, 15.5x (fixtures/scenarios/fp32-matmul,
Kineto traces of bad and good)."""

FP32_TO_TF32_GEMM_SPEEDUP = 7.4
"""Same for TF32 tensor cores (``torch.backends.cuda.matmul.allow_tf32 = True``): half the
BF16 rate (495 TFLOP/s); the lower bound of the fp32-matmul estimate."""

FLASH_TO_UNFUSED_GEMM_FACTOR = 0.3
"""Fused attention kernel time over the time of the matmuls it replaces in unfused attention
(which write and read the S x S scores): cuDNN flash forward+backward 0.72 ms per step against
2.45 ms of score/context GEMMs for the same layers, 0.29 (fixtures/scenarios/unfused-attention,
H100, S=2048 bf16)."""

BF16_TO_FP8_GEMM_FACTOR = 0.62
"""FP8 (e4m3/e5m2, per-tensor scaling) GEMM time plus the cast/amax kernels FP8 adds, divided
by the BF16 GEMM time, for large GEMMs on H100 (fixtures/scenarios/fp8-candidate)."""

MIN_KERNEL_NS = 2_500
"""No kernel finishes faster than this on H100 (launch, ramp-up, tail): the floor of any
kernel a model shrinks."""
