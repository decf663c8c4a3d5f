"""Hardware constants of the what-if models, each with the measurement it comes from.

Per-GPU throughput (FP32, TF32, 16-bit and FP8 rates) lives in `advisor.engine.gpus`.

Only constants that cannot be read off the trace itself live here. Where a trace shows the
quantity (launch latency, copy bandwidth of pinned copies already in it), the rules read it
from the trace instead.
"""

from __future__ import annotations

PINNED_H2D_BYTES_PER_NS = 25.0
"""Host-to-device copy bandwidth from pinned memory, bytes/ns (= GB/s). H100 SXM on PCIe Gen5
x16 moves 25 to 55 GB/s depending on the host; 25 is the conservative end, refined by the
pinned copies measured in fixtures/scenarios/pageable-memcpy/good (see measured.json)."""

FLASH_TO_UNFUSED_GEMM_FACTOR = 0.3
"""Fused attention kernel time over the time of the matmuls it replaces in unfused attention
(which write and read the S x S scores): cuDNN flash forward+backward 0.72 ms per step against
2.45 ms of score/context GEMMs for the same layers, 0.29 (fixtures/scenarios/unfused-attention,
H100, S=2048 bf16)."""

MIN_KERNEL_NS = 2_500
"""No kernel finishes faster than this on H100 (launch, ramp-up, tail): the floor of any
kernel a model shrinks."""
