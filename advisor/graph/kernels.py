"""What a GPU kernel computes: its operation and its datatype.

Traces carry no operator semantics for kernels, only names (``sm90_xmma_gemm_bf16bf16_...``,
``void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl...>``) and, where
the profiler recorded them, the input dtypes and shapes of the framework operator that launched
the kernel (Kineto ``record_shapes``; nsys ``--pytorch=autograd-shapes-nvtx`` puts ``sizes = [...]``
in the NVTX range text). This module reads both, in a fixed precedence.

Operation (`classify_name`), first match wins:

1. The kernel's *base name*: the qualified function name with template arguments, parameter list
   and return type removed (``internal::gemvx::kernel``, not the ``std::enable_if<...>`` around
   it). Template arguments name functors, dtypes and namespaces of *other* things
   (``fbgemm_gpu::...<c10::Half>``, ``split_embedding...<..., Philox...>``), so they never decide
   the operation. Library prefixes are matched before generic words: NCCL/RCCL; attention
   (flash, fmha, sdpa, cuDNN's fused-attention helpers); convolution (cuDNN ``scudnn``/``hcudnn``,
   ``cask_cudnn*``, implicit GEMM, winograd, FFT); GEMM (cuBLAS ``nvjet_*``, ``sm90_xmma_gemm*``,
   ``<arch>_*gemm*``, gemv, cuBLASLt split-K and epilogue helpers, CUTLASS, AMD Tensile/hipBLASLt
   ``Cijk_*``, TensorRT-LLM ``bmm_*``/``gemm_*``, Triton template kernels ``triton_tem_fused_mm``/
   ``addmm``/``bmm``); then normalization, softmax, RNG, optimizer, reduction, elementwise.
2. When the base name says nothing (``cutlass::Kernel2<...>``, a mangled name), the whole name.

Datatype (`gemm_precision`), for GEMM/convolution/attention kernels:

1. Structured type fields of a library's naming scheme: nvjet's operand letters, xmma's
   ``<A><B>_<C><acc>`` field, Tensile's ``Cijk_..._<types>_`` field, TRT-LLM's ``bmm_<out>_<A><B>``.
2. Explicit datatype tokens anywhere in the name, narrowest first: FP4, FP8 (e4m3/e5m2), int8,
   FP16/BF16 (``bf16``, ``fp16``, ``f16``, ``half``, ``h884``/``h16816`` MMA shapes), TF32,
   FP32 (``sgemm``, ``f32f32_f32f32``, SIMT/FFMA), FP64.
3. The tensor-core MMA shape of a legacy cuBLAS/CUTLASS name without a datatype token:
   ``s16816``/``s884`` exist only for 16-bit inputs (FP32 is the accumulator), ``s1688`` is TF32
   from Ampere on and FP16 on Turing (which has no TF32).
4. The launching operator's input dtypes (`op_precision`, where a trace has them).

The order fixes the bug where ``_s16816gemm`` (FP32 *accumulator*) was read as an FP32 GEMM.
"""

from __future__ import annotations

import re
from enum import Enum
from functools import lru_cache
from typing import TYPE_CHECKING

from advisor.graph.model import GpuOp, GpuOpKind

if TYPE_CHECKING:
    from collections.abc import Iterable

    from advisor.graph.model import CpuRange, OpGraph


class KernelCategory(str, Enum):
    GEMM = "gemm"
    CONV = "convolution"
    ATTENTION = "attention"
    COMMUNICATION = "communication"
    NORM = "normalization"
    SOFTMAX = "softmax"
    RNG = "rng"
    REDUCTION = "reduction"
    ELEMENTWISE = "elementwise"
    OPTIMIZER = "optimizer"
    COPY = "copy"
    MEMSET = "memset"
    GRAPH = "cuda-graph"
    OTHER = "other"


C = KernelCategory
_P = re.compile

# Matched against the base name, in this order. Each entry says why it sits where it does.
_BASE_PATTERNS: list[tuple[KernelCategory, re.Pattern[str]]] = [
    (C.COMMUNICATION, _P(r"nccl|rccl|allreduce|all_reduce|allgather|all_gather|reducescatter"
                         r"|reduce_scatter|sendrecv|nvshmem|multimem_", re.I)),
    # KV-cache writes of inference engines carry "flash" in their names but are copies.
    (C.COPY, _P(r"reshape_and_cache|copy_page_indices|nchwtonhwc|nhwctonchw", re.I)),
    # Batch norm lives in the cudnn:: namespace: before the convolution patterns.
    (C.NORM, _P(r"layer_?norm|rms_?norm|batch_?norm|group_?norm|instance_?norm|\bbn_(?:fw|bw)"
                r"|cudnn_bn|welford", re.I)),
    (C.ATTENTION, _P(r"flash|fmha|attention|\battn|sdpa|xformers|compute_dot_do_o|convert_dq",
                     re.I)),
    # cuDNN's conv kernels are named "<arch>_scudnn_..._relu_..." (s: FP32, h: FP16): the "relu"
    # is a fused epilogue, so convolution goes before elementwise.
    (C.CONV, _P(r"conv|scudnn|hcudnn|cask_cudnn|implicit_gemm|implicitgemm|wgrad|dgrad|winograd"
                r"|fprop|fft2d|im2col|cudnn::", re.I)),
    # fbgemm is Meta's library name, not a GEMM: excluded by the lookbehind.
    (C.GEMM, _P(r"(?<!fb)gemm|nvjet|xmma|cutlass|cublas|matmul|^cijk_|^(?:b|batched_)?mm_|^bmm_"
                r"|^gemm_|gemv|splitkreduce|epilogue::impl|triton_tem_fused_(?:add)?b?mm"
                r"|triton_tem_fused_.*mm", re.I)),
    (C.RNG, _P(r"dropout|philox|bernoulli|curand|random_|uniform_|normal_|distribution_elementwise"
               r"|randperm", re.I)),
    (C.SOFTMAX, _P(r"softmax", re.I)),
    # (no bare "lamb": it matches the "{lambda()#1}" in every templated ATen kernel name)
    (C.OPTIMIZER, _P(r"multi_tensor_apply|adamw?_|_adam|fused_adam|sgd_|_sgd|\blamb_|adagrad"
                     r"|fused_.*optim", re.I)),
    (C.REDUCTION, _P(r"reduce|argmax|argmin|cumsum|scan|sum_kernel|norm_kernel|topk|sort"
                     r"|\bdot_kernel|histogram", re.I)),
    (C.ELEMENTWISE, _P(r"elementwise|vectorized|unrolled|pointwise|triton_poi|copy_kernel"
                       r"|fill_kernel|cat_|index|gather|scatter|where|gelu|relu|silu|sigmoid|tanh"
                       r"|add|mul|div|scal_kernel|rotary|quant", re.I)),
]
_TRITON = re.compile(r"^triton_(tem|poi|red|per)_")
"""Inductor names its kernels by kind: ``tem`` a template (matmul, bmm, conv, flex attention:
``triton_tem_fused_addmm_native_layer_norm_view_1`` is a GEMM with a fused epilogue),
``poi`` pointwise, ``red``/``per`` (persistent) reductions; the fused op names follow."""
_TRITON_REFINE: list[tuple[KernelCategory, re.Pattern[str]]] = [
    (C.SOFTMAX, _P(r"softmax", re.I)),
    (C.NORM, _P(r"layer_norm|rms_norm|batch_norm|group_norm|native_norm", re.I)),
    (C.RNG, _P(r"dropout|philox|bernoulli|rand", re.I)),
]
# Fallback on the whole name when the base name matched nothing: only what a template argument
# can say reliably about the kernel's own operation (CUTLASS's kernel class names the conv/GEMM).
_FULL_PATTERNS: list[tuple[KernelCategory, re.Pattern[str]]] = [
    (C.CONV, _P(r"ImplicitGemmConvolution|implicit_gemm|conv2d|conv3d|cudnn_train.*conv"
                r"|cudnn_infer.*conv|4conv6kernel", re.I)),
    (C.GEMM, _P(r"(?<!fb)gemm|cutlass.*Kernel", re.I)),
]

@lru_cache(maxsize=65536)
def base_name(name: str) -> str:
    """The kernel's qualified function name without template arguments, parameters or return
    type: ``void at::native::reduce_kernel<128, 4, ...>(...)`` -> ``at::native::reduce_kernel``."""
    s = name.replace("(anonymous namespace)::", "")
    out, depth = [], 0
    for ch in s:
        if ch in "<(":
            depth += 1
            continue
        if ch in ">)":
            depth = max(0, depth - 1)
            continue
        if depth == 0:
            out.append(ch)
    flat = "".join(out).strip()
    # what is left is "[return type] qualified::name [const]": the name is the last word
    words = [w for w in flat.split() if w not in ("const", "void")]
    return words[-1] if words else name


_WRAPPER = re.compile(r"(?:^|::)(?:Kernel2?|device_kernel)$")
"""CUTLASS's generic entry points (``cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_...>``,
``cutlass_cudnn_infer::Kernel<cutlass_tensorop_s1688fprop_...>``): the kernel is the template
argument, so the base name is read with it."""


@lru_cache(maxsize=65536)
def classify_name(name: str) -> KernelCategory:
    """The operation a kernel computes, from its name (see the module docstring's precedence)."""
    base = base_name(name)
    if _WRAPPER.search(base):
        base = re.sub(r"\(.*$", "", name)
    triton = _TRITON.match(base)
    if triton:
        if triton.group(1) == "tem":
            if "attention" in base:
                return C.ATTENTION
            return C.CONV if "convolution" in base else C.GEMM
        for category, pattern in _TRITON_REFINE:
            if pattern.search(base):
                return category
        return C.ELEMENTWISE if triton.group(1) == "poi" else C.REDUCTION
    for category, pattern in _BASE_PATTERNS:
        if pattern.search(base):
            return category
    for category, pattern in _FULL_PATTERNS:
        if pattern.search(name):
            return category
    return KernelCategory.OTHER


def classify(op: GpuOp) -> KernelCategory:
    if op.kind is GpuOpKind.MEMCPY:
        return KernelCategory.COPY
    if op.kind is GpuOpKind.MEMSET:
        return KernelCategory.MEMSET
    if op.kind is GpuOpKind.GRAPH:
        return KernelCategory.GRAPH
    return classify_name(op.name)


# ----- datatype -----------------------------------------------------------------------------

_NVJET_TYPES = re.compile(r"nvjet_(?:sm\d+_)?([a-z]{3,6})_")
"""cuBLAS's nvjet kernels name their operand types in one token (``nvjet_sm90_tst_...``,
``nvjet_hsh_...``): q/r are FP8 (e4m3/e5m2), t/h are BF16/FP16, s is FP32 (scales, accumulators
and outputs), d FP64. The first two letters are the A and B operands."""
_XMMA_AB = re.compile(r"xmma_[a-z_]*?gemm_(?:indexed_)?([a-z0-9]+)_([a-z0-9]+)_", re.I)
"""cuBLAS/cuDNN xmma kernels name three type fields: the operands as stored, the operands as the
MMA reads them (and its accumulator), the output. ``f32f32_tf32f32_f32`` stores FP32 and
multiplies in TF32 on tensor cores (cuDNN's convolutions under PyTorch's default
``cudnn.allow_tf32 = True``, cuBLAS's with ``matmul.allow_tf32``); ``f32f32_f32f32_f32`` is
FP32 on CUDA cores (``ffma`` in the name)."""
_TENSILE = re.compile(r"^Cijk_[A-Za-z]+_[A-Za-z]+_([A-Z0-9]+?)(?:_|$)")
"""AMD Tensile/hipBLASLt: ``Cijk_Ailk_Bljk_<types>_...``; the first letter is the input type
(S FP32, D FP64, H FP16, B BF16, F8/B8 FP8, I8 int8), a trailing ``B`` is "uses beta"."""
_TRTLLM = re.compile(r"^b?mm_([A-Za-z0-9]+)_([A-Za-z0-9]+)_([A-Za-z0-9]+)_", re.I)
_FP4 = re.compile(r"e2m1|fp4|nvfp4|mxf4", re.I)
_FP8 = re.compile(r"e4m3|e5m2|fp8|f8f8|qmma|\bf8_", re.I)
_INT8 = re.compile(r"int8|_i8|i8i8|imma|i16832|i8816", re.I)
_HALF = re.compile(r"bf16|bfloat16|fp16|f16|half|h\d{3,5}gemm|hgemm|_h1688|_h16816|hcudnn"
                   r"|_h884|h884", re.I)
_TF32 = re.compile(r"tf32|xf32|tfloat32", re.I)
_FP32 = re.compile(r"sgemm|f32f32_f32f32|gemm_?f32|_simt_|simt_|ffma|scudnn|magma_sgemm"
                   r"|_fp32_", re.I)
_FP64 = re.compile(r"dgemm|f64|fp64|double", re.I)
_ELEMENT_TYPES = {
    "float": "fp32", "double": "fp64", "__half": "fp16/bf16", "half": "fp16/bf16",
    "c10::Half": "fp16/bf16", "__nv_bfloat16": "fp16/bf16", "c10::BFloat16": "fp16/bf16",
    "cutlass::half_t": "fp16/bf16", "cutlass::bfloat16_t": "fp16/bf16",
    "__nv_fp8_e4m3": "fp8", "__nv_fp8_e5m2": "fp8", "c10::Float8_e4m3fn": "fp8",
}
_TEMPLATE_ARG = re.compile(r"^[^<(]*<\s*(?:\(?int\)?\s*\d+\s*,\s*|int\s*,\s*|long\s*,\s*"
                           r"|unsigned int\s*,\s*)*"
                           r"([A-Za-z_:0-9]+)")
_MMA_SHAPE = re.compile(r"(?:^|_)([shi])(\d{3,5})(?:tf32)?gemm", re.I)
_ARCH = re.compile(r"(?:^|_)(maxwell|pascal|volta|turing|ampere|ada|hopper|sm\d+)_", re.I)


def _nvjet(name: str) -> str | None:
    m = _NVJET_TYPES.search(name)
    if not m:
        return None
    ab = m.group(1)[:2]
    if set(ab) & {"q", "r"}:
        return "fp8"
    if set(ab) & {"t", "h"}:
        return "fp16/bf16"
    if set(ab) == {"d"}:
        return "fp64"
    if set(ab) == {"s"}:
        return "fp32"
    return None


def _typed_token(tok: str) -> str | None:
    """One datatype field (``bf16bf16``, ``tf32f32``, ``f32f32``, ``e4m3``) -> a precision."""
    for pattern, label in ((_FP4, "fp4"), (_FP8, "fp8"), (_INT8, "int8"), (_HALF, "fp16/bf16"),
                           (_TF32, "tf32"), (_FP64, "fp64")):
        if pattern.search(tok):
            return label
    if re.fullmatch(r"(?:f32)+", tok, re.I):
        return "fp32"
    return None


def _structured(name: str) -> str | None:
    nv = _nvjet(name)
    if nv:
        return nv
    m = _XMMA_AB.search(name)
    if m:
        got = _typed_token(m.group(1))
        if got == "fp32" and _typed_token(m.group(2)) == "tf32":
            return "tf32"  # stored FP32, multiplied in TF32
        if got:
            return got
    m = _TENSILE.search(name)
    if m:
        t = m.group(1)
        for prefix, label in (("F8", "fp8"), ("B8", "fp8"), ("I8", "int8"), ("4xi8", "int8"),
                              ("H", "fp16/bf16"), ("B", "fp16/bf16"), ("S", "fp32"), ("D", "fp64"),
                              ("X", "tf32")):
            if t.startswith(prefix):
                return label
    m = _TRTLLM.search(base_name(name))
    if m:
        labels = [_typed_token(x) or {"bfloat16": "fp16/bf16", "fp16": "fp16/bf16",
                                      "fp32": "fp32"}.get(x.lower()) for x in m.groups()[1:2]]
        if labels and labels[0]:
            return labels[0]
    return None


def _mma_shape(name: str) -> str | None:
    m = _MMA_SHAPE.search(name)
    if not m:
        return None
    acc, shape = m.group(1).lower(), m.group(2)
    if acc == "i":
        return "int8"
    if acc == "h":
        return "fp16/bf16"
    if shape in ("16816", "884", "8816"):
        return "fp16/bf16"  # these MMA shapes take only 16-bit inputs; "s" is the accumulator
    if shape == "1688":
        arch = _ARCH.search(name)
        if arch and arch.group(1).lower() in ("turing", "volta", "sm75", "sm70"):
            return "fp16/bf16"  # Turing's m16n8k8 is FP16; TF32 starts with Ampere
        return "tf32"
    return None


@lru_cache(maxsize=65536)
def gemm_precision(name: str) -> str:
    """The input datatype of a GEMM/conv/attention kernel, from its name alone:
    "fp4", "fp8", "int8", "fp16/bf16", "tf32", "fp32", "fp64" or "unknown"."""
    got = _structured(name)
    if got:
        return got
    for pattern, label in ((_FP4, "fp4"), (_FP8, "fp8"), (_INT8, "int8"), (_HALF, "fp16/bf16"),
                           (_TF32, "tf32")):
        if pattern.search(name):
            return label
    shape = _mma_shape(name)
    if shape:
        return shape
    if _FP32.search(name):
        return "fp32"
    if _FP64.search(name):
        return "fp64"
    # cuBLAS/cuDNN helper templates (gemv, split-K reduce, winograd, FFT) take their element
    # type as the first type argument after any integer tile parameters
    m = _TEMPLATE_ARG.search(name.removeprefix("void "))
    if m and m.group(1) in _ELEMENT_TYPES:
        return _ELEMENT_TYPES[m.group(1)]
    return "unknown"


# ----- what the launching operator says ------------------------------------------------------

_DTYPE_LABELS = {
    "float": "fp32", "float32": "fp32", "c10::float": "fp32",
    "c10::bfloat16": "fp16/bf16", "bfloat16": "fp16/bf16", "c10::half": "fp16/bf16",
    "half": "fp16/bf16", "float16": "fp16/bf16",
    "c10::float8_e4m3fn": "fp8", "c10::float8_e5m2": "fp8", "float8_e4m3fn": "fp8",
    "float8_e5m2": "fp8", "double": "fp64", "float64": "fp64",
}
_NVTX_SIZES = re.compile(r"sizes = (\[.*?\]\])")


def launching_op(graph: OpGraph, op: GpuOp) -> CpuRange | None:
    """The innermost framework operator range around the host call that launched ``op``
    (``aten::mm`` for a cuBLAS GEMM), where the trace has operator or ``--pytorch`` NVTX ranges."""
    if op.correlation is None:
        return None
    # Memoized per launch: a GEMM's operator is asked for by several rules and the report
    # (about 4 times a kernel on HTA's df_index_resolver trace, 0.2 s of its CPU; issue #39).
    # The answer depends on the launch alone: `OpGraph.launcher` reads (pid, correlation).
    key = (op.pid, op.correlation)
    memo = graph.launching_ops
    if key in memo:
        return memo[key]
    found = None
    call = graph.launcher(op)
    if call is not None:
        for r in reversed(graph.ranges_at(call.pid, call.tid, call.start_ns)):
            if r.name.startswith(("aten::", "cudnn", "cublas")) or r.dtypes or r.shapes:
                found = r
                break
    memo[key] = found
    return found


def input_shapes(r: CpuRange) -> tuple | None:
    """The operator's input shapes: Kineto's ``Input Dims``, or the ``sizes = [...]`` an nsys
    ``--pytorch=autograd-shapes-nvtx`` range carries in its text."""
    if r.shapes:
        return r.shapes
    m = _NVTX_SIZES.search(r.name)
    if not m:
        return None
    try:
        import ast

        value = ast.literal_eval(m.group(1))
    except (ValueError, SyntaxError):
        return None

    def tup(x):
        return tuple(tup(v) for v in x) if isinstance(x, list) else x

    return tup(value)


def input_precision(r: CpuRange) -> str:
    """The narrowest floating-point input datatype the operator recorded, or "unknown"."""
    dtypes = r.dtypes or ()
    if type(dtypes) is tuple:
        try:
            return _dtypes_precision(dtypes)
        except TypeError:  # an element that cannot be hashed (none the readers make)
            pass
    return _precision_of(dtypes)


@lru_cache(maxsize=4096)  # asked of every kernel's operator; a window repeats few dtype lists
def _dtypes_precision(dtypes: tuple) -> str:
    """`_precision_of` for a tuple: tuples that compare equal give the same answer (a dtype is
    read through its text, and no text of an equal-comparing non-string is a dtype name)."""
    return _precision_of(dtypes)


def _precision_of(dtypes: Iterable[object]) -> str:
    labels = [_DTYPE_LABELS.get(str(t).lower()) for t in dtypes]
    for label in ("fp8", "fp16/bf16", "fp32", "fp64"):
        if label in labels:
            return label
    return "unknown"


def op_precision(graph: OpGraph, op: GpuOp) -> str:
    """The kernel's input datatype: its name first (what the kernel computes), then the
    launching operator's recorded input dtypes when the name carries none.

    An FP32-typed operator may still run a TF32 kernel, and a BF16 autocast region an FP32 one
    for an op autocast keeps in FP32, so the name decides whenever it can."""
    got = gemm_precision(op.name)
    if got != "unknown":
        return got
    r = launching_op(graph, op)
    return input_precision(r) if r is not None else "unknown"


# ----- GELU -------------------------------------------------------------------------------------

_GELU = re.compile(r"gelu", re.I)
_GELU_EPILOGUE = re.compile(r"gelu.*(?:gemm|nvjet|xmma|cutlass)|(?:gemm|nvjet|xmma|cutlass).*gelu"
                            r"|epilogue.*gelu|_gelu_|bias_gelu", re.I)


@lru_cache(maxsize=65536)  # pure in the name; a window repeats few names
def is_gelu(name: str) -> bool:
    """A standalone GELU (or bias+GELU) elementwise kernel, not a GEMM with a GELU epilogue."""
    return bool(_GELU.search(name)) and classify_name(name) not in (
        KernelCategory.GEMM,
        KernelCategory.CONV,
    )


@lru_cache(maxsize=65536)  # pure in the name; a window repeats few names
def has_gelu_epilogue(name: str) -> bool:
    return bool(_GELU_EPILOGUE.search(name)) and classify_name(name) is KernelCategory.GEMM


@lru_cache(maxsize=65536)  # pure in the name; a window repeats few names
def short_name(name: str, limit: int = 90) -> str:
    """A readable kernel name: template arguments and parameter lists dropped."""
    out, depth = [], 0
    # "(anonymous namespace)" is not a parameter list: stripping from it would drop the name.
    for ch in name.replace("(anonymous namespace)::", ""):
        if ch == "<":
            depth += 1
            if depth == 1:
                out.append("<…>")
            continue
        if ch == ">":
            depth = max(0, depth - 1)
            continue
        if depth == 0:
            out.append(ch)
    s = "".join(out)
    s = re.sub(r"\(.*\)$", "", s).replace("void ", "").strip()
    return s if len(s) <= limit else s[: limit - 1] + "…"
