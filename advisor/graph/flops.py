"""The work a framework operator asked of the GPU: FLOPs and bytes, from its recorded inputs.

A kernel's name says what it computes, not how much; the operator that launched it does, when
the profiler recorded its input shapes (Kineto ``record_shapes``; nsys
``--pytorch=autograd-shapes-nvtx`` ranges). From those alone, never from a guess:

* **GEMMs** (``mm``, ``addmm``, ``bmm``, ``baddbmm``, ``_addmm_activation``, ``linear``,
  ``matmul``, FP8 ``_scaled_mm``; autograd's backward GEMMs are ``aten::mm`` calls with their own shapes):
  ``2*M*N*K`` per batch. Bytes: A, B and C once each (the minimum a GEMM must move).
* **Attention** (SDPA and the flash, memory-efficient and cuDNN operators behind it):
  forward ``4*B*H*Sq*Sk*D`` (``QK^T`` and ``PV``), halved when causal, which only the operator's
  ``is_causal`` argument can tell (Kineto ``Concrete Inputs``; unknown: no FLOPs). Backward
  executes five such matmuls (``QK^T`` recomputed, ``dV``, ``dP``, ``dQ``, ``dK``: FlashAttention
  2's count, 2.5x forward); the *model* FLOPs (MFU's numerator, PaLM's convention) count four,
  as if nothing were recomputed. Bytes: Q, K, V and O once each (and dO, dQ, dK, dV backward).
* **Memory-bound operators** (elementwise, copies, fills, softmax, layer norm): no FLOPs (their
  roof is bandwidth; an arithmetic count would say nothing), bytes = each tensor input read
  once plus the output written once, the minimum traffic, so achieved GB/s is a lower bound.

Everything else gets ``None`` with the reason, so a report can say what it could not count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from advisor.graph.gemm_shapes import operator_name
from advisor.graph.model import CpuRange

ITEMSIZE = {
    "c10::bfloat16": 2, "bfloat16": 2, "c10::half": 2, "half": 2, "float16": 2,
    "float": 4, "float32": 4, "double": 8, "float64": 8, "long int": 8, "int64": 8,
    "int": 4, "int32": 4, "short int": 2, "bool": 1, "unsigned char": 1, "signed char": 1,
    "c10::float8_e4m3fn": 1, "c10::float8_e5m2": 1, "float8_e4m3fn": 1, "float8_e5m2": 1,
}
"""Bytes per element of the dtypes PyTorch records (``Input type``), lower-cased."""

PRECISION_ITEMSIZE = {"fp8": 1, "int8": 1, "fp16/bf16": 2, "tf32": 4, "fp32": 4, "fp64": 8}
"""Bytes per element of a GEMM's inputs by the kernel's datatype, where the operator's dtypes
were not recorded (nsys ranges carry shapes only)."""


@dataclass(frozen=True)
class Work:
    """What one operator computes and moves; ``reason`` says why a figure is None."""

    op: str
    kind: str  # "gemm", "attention", "memory" or "unknown"
    flops: float | None  # executed on the GPU (recomputation included)
    model_flops: float | None  # counted for MFU (no recomputation)
    bytes: float | None  # minimum HBM traffic
    sizes: tuple[int, ...] | None = None  # (batch, M, K, N) or (B, H, Sq, Sk, D)
    reason: str = ""


GEMM_OPS = frozenset({"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm",
                      "aten::_addmm_activation", "aten::linear", "aten::matmul",
                      "aten::_scaled_mm"})

# operator -> (layout of q/k/v: "bhsd" or "bshd", index of is_causal (or the mask type) among
# its arguments, backward?). From PyTorch's native_functions.yaml argument order.
ATTENTION_OPS: dict[str, tuple[str, int, bool]] = {
    "aten::_scaled_dot_product_flash_attention": ("bhsd", 4, False),
    "aten::_scaled_dot_product_flash_attention_backward": ("bhsd", 11, True),
    "aten::_scaled_dot_product_efficient_attention": ("bhsd", 6, False),
    "aten::_scaled_dot_product_efficient_attention_backward": ("bhsd", 11, True),
    "aten::_scaled_dot_product_cudnn_attention": ("bhsd", 6, False),
    "aten::_scaled_dot_product_cudnn_attention_backward": ("bhsd", 14, True),
    "aten::_cudnn_attention_forward": ("bhsd", 10, False),
    "aten::_cudnn_attention_backward": ("bhsd", 14, True),
    "aten::_flash_attention_forward": ("bshd", 8, False),
    "aten::_flash_attention_backward": ("bshd", 11, True),
    "aten::_efficient_attention_forward": ("bshd", 9, False),
    "aten::_efficient_attention_backward": ("bshd", 14, True),
}

MEMORY_OPS = frozenset({
    "aten::add", "aten::sub", "aten::mul", "aten::div", "aten::gelu", "aten::relu",
    "aten::silu", "aten::tanh", "aten::sigmoid", "aten::neg", "aten::exp", "aten::rsqrt",
    "aten::pow", "aten::gelu_backward", "aten::silu_backward", "aten::threshold_backward",
    "aten::tanh_backward", "aten::sigmoid_backward", "aten::add_", "aten::sub_", "aten::mul_",
    "aten::div_", "aten::copy_", "aten::fill_", "aten::zero_", "aten::_softmax",
    "aten::_log_softmax", "aten::_softmax_backward_data", "aten::_log_softmax_backward_data",
    "aten::native_layer_norm", "aten::native_layer_norm_backward", "aten::native_dropout",
})
"""Operators whose minimum traffic follows from their inputs: each tensor read once, one output
of the broadcast shape written (in place: the first input; fills: written only)."""


def _tensors(shapes: tuple) -> list[tuple[int, ...]]:
    return [s for s in shapes if isinstance(s, tuple) and s and all(isinstance(d, int) for d in s)]


def _numel(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


def _itemsizes(r: CpuRange, shapes: tuple) -> list[int | None]:
    """Bytes per element of each recorded input (None where the dtype is unknown)."""
    types = list(r.dtypes or ())
    return [ITEMSIZE.get(str(types[i]).lower()) if i < len(types) else None
            for i in range(len(shapes))]


def gemm_work(op: str, shapes: tuple, itemsize: int | None) -> Work:
    """FLOPs of a GEMM operator from its two matrix inputs: ``2*batch*M*K*N``."""
    mats = _tensors(shapes)
    if op == "aten::linear":  # input (..., K), weight (N, K), optional bias
        if len(mats) < 2 or len(mats[1]) != 2 or mats[0][-1] != mats[1][1]:
            return Work(op, "gemm", None, None, None, reason="linear's input and weight not recorded")
        a, w = mats[0], mats[1]
        m, k, n, batch = _numel(a[:-1]), a[-1], w[0], 1
    else:
        if op in ("aten::addmm", "aten::baddbmm", "aten::_addmm_activation"):
            mats = mats[1:3] if len(mats) >= 3 else mats[-2:]
        if len(mats) < 2 or len(mats[0]) < 2 or len(mats[1]) < 2:
            return Work(op, "gemm", None, None, None, reason="the operator's matrix inputs "
                        "were not recorded (record_shapes off, or 1-D operands)")
        a, b = mats[0], mats[1]
        if a[-1] != b[-2]:
            return Work(op, "gemm", None, None, None, reason=f"inner sizes differ: {a} x {b}")
        lead_a, lead_b = a[:-2], b[:-2]
        try:
            lead = _broadcast(lead_a, lead_b)
        except ValueError:
            return Work(op, "gemm", None, None, None, reason=f"batch sizes differ: {a} x {b}")
        batch, m, k, n = _numel(lead), a[-2], a[-1], b[-1]
        if op == "aten::matmul" and not lead_b:  # (..., M, K) x (K, N): the batch is rows
            batch, m = 1, _numel(a[:-1])
    flops = 2.0 * batch * m * k * n
    moved = (None if itemsize is None
             else float(itemsize * batch * (m * k + k * n + m * n)))
    return Work(op, "gemm", flops, flops, moved, (batch, m, k, n),
                "" if moved is not None else "operand dtypes not recorded")


def _broadcast(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """NumPy broadcasting of shapes (ValueError where they do not broadcast)."""
    n = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(n):
        dims = {s[len(s) - n + i] for s in shapes if len(s) - n + i >= 0} - {1}
        if len(dims) > 1:
            raise ValueError(shapes)
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def _causal(r: CpuRange, index: int) -> bool | None:
    vals = r.concrete or ()
    if index >= len(vals):
        return None
    v = vals[index].strip().lower()
    if v in ("true", "false"):
        return v == "true"
    if v.isdigit():  # the memory-efficient kernels' mask type: 0 none, 1/2 causal
        return v != "0"
    return None


def attention_work(r: CpuRange, op: str, shapes: tuple, itemsize: int | None) -> Work:
    """FLOPs of an attention operator from Q, K (and V) shapes and its ``is_causal``."""
    layout, causal_at, backward = ATTENTION_OPS[op]
    mats = [s for s in _tensors(shapes) if len(s) == 4]
    need = 4 if backward else 3  # backward: grad_out, q, k, v, ...
    if len(mats) < need:
        return Work(op, "attention", None, None, None, reason="query/key/value shapes not recorded")
    q, k = (mats[1], mats[2]) if backward else (mats[0], mats[1])
    if layout == "bhsd":
        b, h, sq, d = q
        sk = k[2]
    else:
        b, sq, h, d = q
        sk = k[1]
    causal = _causal(r, causal_at)
    sizes = (b, h, sq, sk, d)
    if causal is None:
        return Work(op, "attention", None, None, None, sizes,
                    "is_causal not recorded (Kineto Concrete Inputs): FLOPs differ by 2x")
    fwd = 4.0 * b * h * sq * sk * d * (0.5 if causal else 1.0)
    flops, model = (2.5 * fwd, 2.0 * fwd) if backward else (fwd, fwd)
    tensors = (8 if backward else 4) * b * h * max(sq, sk) * d
    moved = None if itemsize is None else float(itemsize * tensors)
    return Work(op, "attention", flops, model, moved, sizes,
                "" if moved is not None else "operand dtypes not recorded")


def memory_work(r: CpuRange, op: str, shapes: tuple) -> Work:
    """Minimum bytes of a memory-bound operator: tensor inputs read once, the output written."""
    sizes = _itemsizes(r, shapes)
    tensors = [(s, z) for s, z in zip(shapes, sizes, strict=False)
               if isinstance(s, tuple) and s and all(isinstance(d, int) for d in s)]
    if not tensors or any(z is None for _, z in tensors):
        return Work(op, "memory", None, None, None, tensors[0][0] if tensors else None,
                    reason="operand dtypes not recorded")
    shape = tensors[0][0]
    if op in ("aten::fill_", "aten::zero_"):
        s, z = tensors[0]
        return Work(op, "memory", None, None, float(_numel(s) * z), shape)
    read = sum(_numel(s) * z for s, z in tensors)
    if op.endswith("_") or op == "aten::copy_":  # in place: the first input is the output
        s, z = tensors[0]
        written = _numel(s) * z
        if op == "aten::copy_":
            read -= written  # copy_ overwrites its destination without reading it
    elif op in ("aten::native_layer_norm_backward",):
        s, z = tensors[0]
        written = _numel(s) * z
    else:
        try:
            out = _broadcast(*(s for s, _ in tensors)) if op != "aten::native_layer_norm" \
                else tensors[0][0]
        except ValueError:
            return Work(op, "memory", None, None, None, reason="inputs do not broadcast")
        written = _numel(out) * max(z for _, z in tensors)
    return Work(op, "memory", None, None, float(read + written), shape)


def operator_work(r: CpuRange, shapes: tuple | None, gemm_itemsize: int | None = None) -> Work:
    """The work of one operator range; ``shapes``: its input shapes (`kernels.input_shapes`);
    ``gemm_itemsize``: bytes per GEMM operand where the range recorded no dtypes."""
    op = operator_name(r.name)
    if shapes is None:
        return Work(op, "unknown", None, None, None, reason="input shapes not recorded")
    sizes = _itemsizes(r, shapes)
    first = next((z for z in sizes if z is not None), None)
    if op in GEMM_OPS:
        return gemm_work(op, shapes, first if first is not None else gemm_itemsize)
    if op in ATTENTION_OPS:
        return attention_work(r, op, shapes, first if first is not None else gemm_itemsize)
    if op in MEMORY_OPS:
        return memory_work(r, op, shapes)
    return Work(op, "unknown", None, None, None, reason=f"no work model for {op}")
