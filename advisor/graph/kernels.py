"""What a GPU kernel does, from its name.

Traces carry no operator semantics for kernels, only names (``sm90_xmma_gemm_bf16bf16_...``,
``void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl...>``), so the
report's time-by-category table and several rules classify by name. Patterns cover cuBLAS,
cuBLASLt (``nvjet``), CUTLASS, cuDNN, PyTorch's ATen kernels, Triton, flash/cuDNN attention and
NCCL; anything else is "other". Order matters: the first matching category wins.
"""

from __future__ import annotations

import re
from enum import Enum
from functools import lru_cache

from advisor.graph.model import GpuOp, GpuOpKind


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


_PATTERNS: list[tuple[KernelCategory, re.Pattern[str]]] = [
    (KernelCategory.COMMUNICATION, re.compile(r"nccl|allreduce|all_reduce|allgather|reducescatter"
                                              r"|sendrecv|nvshmem", re.I)),
    (KernelCategory.ATTENTION, re.compile(r"flash|fmha|attention|attn|sdpa|cudnn_generated_fort_native_sdpa"
                                          r"|xformers", re.I)),
    (KernelCategory.CONV, re.compile(r"conv|implicit_gemm|wgrad|dgrad|winograd|fprop|cudnn::", re.I)),
    (KernelCategory.GEMM, re.compile(r"gemm|nvjet|cutlass|xmma|cublas|matmul|_mm_|\bmm\b|gemv|"
                                     r"sm\d+_xmma|ampere_.*(?:s|h|bf16)\d+|volta_.*gemm|turing_.*gemm"
                                     r"|splitKreduce|triton_tem_fused_mm", re.I)),
    (KernelCategory.RNG, re.compile(r"dropout|philox|bernoulli|curand|random_|uniform_|normal_"
                                    r"|distribution_elementwise", re.I)),
    (KernelCategory.SOFTMAX, re.compile(r"softmax", re.I)),
    (KernelCategory.NORM, re.compile(r"layer_?norm|rms_?norm|batch_?norm|group_?norm|instance_?norm"
                                     r"|bn_fw|bn_bw|welford|cudnn_bn", re.I)),
    # (no bare "lamb": it matches the "{lambda()#1}" in every templated ATen kernel name)
    (KernelCategory.OPTIMIZER, re.compile(r"multi_tensor_apply|adamw?_|_adam|fused_adam|sgd_|_sgd|"
                                          r"\blamb_|fused_.*optim", re.I)),
    (KernelCategory.REDUCTION, re.compile(r"reduce|argmax|argmin|cumsum|scan|sum_kernel|norm_kernel"
                                          r"|topk|sort", re.I)),
    (KernelCategory.ELEMENTWISE, re.compile(r"elementwise|vectorized|unrolled|pointwise|triton_poi"
                                            r"|copy_kernel|fill_kernel|cat_|index|gather|scatter|where"
                                            r"|gelu|relu|silu|sigmoid|tanh|add|mul|div", re.I)),
]

_FP32_GEMM = re.compile(
    r"sgemm|_s\d+gemm|gemm_?f32|f32f32_f32|_sgemm_|gemmSN_|gemv2T_kernel_val<int, int, float"
    r"|cutlass.*(?:simt|_s1688|sgemm)|magma_sgemm|Kernel2<float"
    r"|sm\d+_xmma_gemm_f32f32_f32f32_f32|ampere_sgemm|volta_sgemm|maxwell_sgemm|_simt_",
    re.I,
)
_TF32_GEMM = re.compile(r"tf32|_s1688|1688gemm|_tf32_", re.I)
_FP8_GEMM = re.compile(r"e4m3|e5m2|fp8|f8f8|_e4m3|qmma", re.I)
_NVJET_TYPES = re.compile(r"nvjet_(?:sm\d+_)?([a-z]{3,6})_")
"""cuBLAS's nvjet kernels name their operand types in one token (``nvjet_sm90_tst_...``):
q/r are FP8 (e4m3/e5m2), t/h are BF16/FP16, s is FP32 (scales and accumulators)."""
_HALF_GEMM = re.compile(r"bf16|f16|h\d+gemm|hgemm|_h1688|_h16816|half|s16816gemm_(?:bf)?f?16", re.I)
_GELU = re.compile(r"gelu", re.I)
_GELU_EPILOGUE = re.compile(r"gelu.*(?:gemm|nvjet|xmma|cutlass)|(?:gemm|nvjet|xmma|cutlass).*gelu"
                            r"|epilogue.*gelu|_gelu_|bias_gelu", re.I)


@lru_cache(maxsize=65536)
def classify_name(name: str) -> KernelCategory:
    for category, pattern in _PATTERNS:
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


@lru_cache(maxsize=65536)  # pure in the name; a window repeats few names
def gemm_precision(name: str) -> str:
    """"fp8", "fp16/bf16", "tf32", "fp32" or "unknown" for a GEMM/conv kernel name."""
    nvjet = _NVJET_TYPES.search(name)
    if nvjet:
        types = nvjet.group(1)
        if "q" in types or "r" in types:
            return "fp8"
        if "t" in types or "h" in types:
            return "fp16/bf16"
        if set(types) == {"s"}:
            return "fp32"
    if _FP8_GEMM.search(name):
        return "fp8"
    if _TF32_GEMM.search(name):
        return "tf32"
    if _FP32_GEMM.search(name):
        return "fp32"
    if _HALF_GEMM.search(name):
        return "fp16/bf16"
    return "unknown"


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
