"""Kernel classification on real kernel names, one table row per name.

Each row names a trace (``../shared/traces`` or ``fixtures/``), a substring that picks one kernel
out of it, and what a performance engineer says that kernel computes. The test reads the full
name from the trace itself, so the table cannot drift into names nobody's GPU emitted. GPUs:
A100 (sm80), V100 (sm70), H100/H200 (sm90), B200 (sm100), AMD MI250 (gfx90a).

A second table holds names cuBLAS and Inductor emit on hardware we have no trace of (A100 BF16,
V100/T4 FP16 tensor-core GEMMs, Inductor templates), quoted from public profiler output; they
are the names the old classifier got wrong.
"""

from __future__ import annotations

from functools import cache

import pytest

from advisor.graph.kernels import KernelCategory as K
from advisor.graph.kernels import classify_name, gemm_precision
from advisor.graph.model import GpuOpKind
from advisor.ingest.base import load_trace
from tests.conftest import ROOT, SHARED_TRACES

AMD = "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz"  # MI250, ROCm 6.2
A100 = "hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"
A100_NCCL = "hta/nccl_parser_config/nccl_data.json.gz"
V100 = "kineto/tb_plugin_samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
V100_B = "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
V100_C = "hta/df_index_resolver/df_index_resolver.json.gz"
V100_D = "hta/negative_queue_length_values_check/rank0.json.gz"
H100_VIT = "tracelens/h100/Falconsai_nsfw_image_detection__1016002.json.gz"
H100_TSF = "tracelens/h100/facebook_timesformer-base-finetuned-k400__1016002.json.gz"
H100_QWEN = "tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
H100_NSYS = "nsys-ai/h100_2gpu_1s.sqlite"
H200 = "nvfuser/8fa9ec2/report1.sqlite"
B200 = "tracelens/b200/eager_trace.json.gz"
FP8_GOOD = "fixtures:scenarios/fp8-candidate/good/nsys.sqlite.gz"
SYNC_BAD = "fixtures:scenarios/host-sync/bad/nsys.sqlite.gz"
LOSS_BAD = "fixtures:scenarios/cpu-bound-loss/bad/nsys.sqlite.gz"
TIMM_R18 = "fixtures:source-lines/traces/timm/trace_rank0.json.gz"  # H100, FP32, cuDNN's TF32
LIGHTNING = "fixtures:public/lightning-vit-b/trace.json.gz"  # H100, FP32, TF32 off for matmuls

G, CV, AT = K.GEMM, K.CONV, K.ATTENTION
HALF = "fp16/bf16"

REAL = [
    # trace, substring of the kernel name, category, precision (GEMM/conv/attention only)
    (AMD, "Cijk_Alik_Bljk_SB_", G, "fp32"),  # Tensile/hipBLASLt, S = FP32
    (AMD, "Cijk_Ailk_Bjlk_SB_", G, "fp32"),
    (AMD, "multi_tensor_apply_kernel", K.OPTIMIZER, None),
    (AMD, "at::native::reduce_kernel<512, 1", K.REDUCTION, None),
    (A100, "ampere_gcgemm_64x64_nt", G, "unknown"),  # complex GEMM of an FFT conv
    (A100, "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32", CV, "tf32"),
    (A100, "fused_dropout_kernel_vec", K.RNG, None),
    (A100, "cudnn_ampere_scudnn_128x64_relu", CV, "fp32"),  # relu is the conv's epilogue
    (A100_NCCL, "cutlass_tensorop_s1688fprop_optimized_tf32", CV, "tf32"),
    (A100_NCCL, "cudnn::bn_fw_tr_1C11_kernel_NCHW", K.NORM, None),
    (A100_NCCL, "softmax_warp_forward", K.SOFTMAX, None),
    (V100, "volta_scudnn_128x64_relu_interior_nn_v1", CV, "fp32"),
    (V100, "implicit_convolve_sgemm", CV, "fp32"),
    (V100_B, "cudnn_infer_volta_scudnn_128x128_stridedB_small", CV, "fp32"),
    (V100_B, "cudnn_infer_volta_scudnn_winograd_128x128", CV, "fp32"),
    (V100_C, "volta_sgemm_128x64_nn", G, "fp32"),
    (V100_C, "splitKreduce_kernel<float", G, "fp32"),
    (V100_C, "magma_sgemmEx_kernel", G, "fp32"),
    (V100_C, "ncclKernel_AllReduce_RING_LL_Sum_float", K.COMMUNICATION, None),
    (V100_D, "gemv2T_kernel_val<int, int, float", G, "fp32"),
    (V100_D, "fbgemm_gpu::permute_2D_data_kernel", K.OTHER, None),  # Meta's library, no GEMM
    (H100_VIT, "sm90_xmma_gemm_bf16bf16_bf16f32_f32", G, HALF),
    (H100_VIT, "cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_128x64", G, HALF),
    (H100_VIT, "pytorch_flash::flash_fwd_kernel", AT, HALF),
    (H100_VIT, "GeluCUDAKernelImpl", K.ELEMENTWISE, None),
    (H100_TSF, "cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_nn", G, HALF),
    (H100_TSF, "cutlass_80_wmma_tensorop_bf16_s161616gemm", G, HALF),
    (H100_TSF, "internal::gemvx::kernel<int, int, __nv_bfloat16", G, HALF),
    (H100_TSF, "cunn_SoftMaxForward", K.SOFTMAX, None),
    (H100_QWEN, "cutlass_80_simt_sgemm_128x32", G, "fp32"),
    (H100_NSYS, "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x256x8", G, "fp32"),
    (H200, "nvjet_hsh_128x256", G, HALF),
    ("nvfuser/ee4fcf3/report1.sqlite", "nvfuser_pointwise", K.ELEMENTWISE, None),
    (B200, "bmm_Bfloat16_MxE2m1MxE4m3_Fp32", G, "fp4"),  # TRT-LLM MXFP4 weights
    (B200, "fmhaSm100aKernel_QkvE4m3OBfloat16", AT, "fp8"),
    (B200, "vllm::reshape_and_cache_flash_kernel", K.COPY, None),  # a KV-cache write
    (B200, "rms_norm_kernel", K.NORM, None),
    (FP8_GOOD, "nvjet_sm90_qqtst_128x256", G, "fp8"),
    (FP8_GOOD, "nvjet_sm90_qrsss_128x160", G, "fp8"),
    (FP8_GOOD.replace("good", "bad"), "nvjet_sm90_tst_192x192", G, HALF),
    (FP8_GOOD, "triton_red_fused_abs_amax_0", K.REDUCTION, None),
    (SYNC_BAD, "cudnn_generated_fort_native_sdpa_sm90_flash_fprop", AT, HALF),
    (LOSS_BAD, "cutlass_80_tensorop_s16816gemm_bf16_64x64_32x6_nt", G, HALF),
    # xmma names stored, multiplied and output types: FP32 stored, TF32 on tensor cores
    (TIMM_R18, "sm90_xmma_wgrad_indexed_implicit_gemm_f32f32_tf32f32_f32", CV, "tf32"),
    (TIMM_R18, "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32", CV, "tf32"),
    (LIGHTNING, "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x128x8_stage3_warpsize1x4x1_ffma",
     G, "fp32"),
]

PUBLIC = [
    # cuBLAS on A100 / V100 / T4, CUTLASS, Inductor templates: the names the old order misread
    ("ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_tn", G, HALF),
    ("ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_nn", G, HALF),
    ("ampere_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_nn", G, HALF),
    ("ampere_tf32_s1688gemm_tf32_256x128_ldg8_f2f_stages_32x3_nn", G, "tf32"),
    ("ampere_sgemm_128x64_nn", G, "fp32"),
    ("volta_fp16_s884gemm_fp16_128x128_ldg8_f2f_nn", G, HALF),
    ("volta_h884gemm_64x128_ldg8_nn", G, HALF),
    ("turing_fp16_s1688gemm_fp16_256x128_ldg8_f2f_tn", G, HALF),  # Turing has no TF32
    ("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8>"
     "(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8::Params)", G, HALF),
    ("triton_tem_fused_addmm_0", G, "unknown"),
    ("triton_tem_fused_addmm_native_layer_norm_view_1", G, "unknown"),
    ("triton_tem_fused_bmm_3", G, "unknown"),
    ("triton_tem_fused_mm_t_view_14", G, "unknown"),
    ("triton_poi_fused_addmm_gelu_2", K.ELEMENTWISE, None),
    ("triton_per_fused__softmax_0", K.SOFTMAX, None),
    ("Cijk_Ailk_Bljk_BBS_BH_MT128x128x32_MI32x32x8x1_SN_1LDSB0", G, HALF),  # MI300 BF16
    ("Cijk_Ailk_Bljk_HHS_BH_MT128x128x32_MI32x32x8x1_SN_1LDSB0", G, HALF),  # MI300 FP16
]


@cache
def _names(trace: str) -> tuple[str, ...]:
    if trace.startswith("fixtures:"):
        path = ROOT / "fixtures" / trace.removeprefix("fixtures:")
    else:
        path = SHARED_TRACES / trace
    graph = load_trace(path)
    return tuple(sorted({o.name for o in graph.gpu_ops if o.kind is GpuOpKind.KERNEL}))


def _check(name: str, category: K, precision: str | None) -> None:
    assert classify_name(name) is category, name
    if precision is not None:
        assert gemm_precision(name) == precision, name


@pytest.mark.parametrize(("trace", "key", "category", "precision"), REAL,
                         ids=[f"{r[1][:40]}" for r in REAL])
def test_real_kernel_names_are_classified_by_what_they_compute(trace, key, category, precision):
    matches = [n for n in _names(trace) if key in n]
    assert matches, f"{key!r} is not a kernel of {trace}"
    for name in matches:
        _check(name, category, precision)


@pytest.mark.parametrize(("name", "category", "precision"), PUBLIC, ids=[r[0][:40] for r in PUBLIC])
def test_names_from_other_gpus_and_inductor_are_classified(name, category, precision):
    _check(name, category, precision)
