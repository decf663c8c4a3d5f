// y = gelu(x @ w^T + bias) in ONE cuBLASLt GEMM, the pre-activation kept for the backward pass:
// the GELU_AUX(_BIAS) epilogue Transformer Engine's fused MLP uses (cuBLASLt computes the GELU,
// tanh approximation, on the accumulator tile in registers and writes both the activation and the
// pre-activation "aux" tensor). unfused-gemm-gelu's fix, timed where Transformer Engine is not
// installed: benchmarks/scenarios/gelu_epilogue.py builds this file with nvcc and calls it through
// ctypes (a torch C++ extension would compile torch's headers, about a minute a build).
//
// Shapes are torch's row-major ones: x [m, k], w [n, k] (an nn.Linear weight), y and aux [m, n].
// In cuBLAS's column-major terms that is y^T [n, m] = op_T(w: k x n, ld k) * x (k x m, ld k).
// bf16 operands, bias and outputs; fp32 accumulation and scaling (as torch's own bf16 addmm).
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <tuple>

namespace {

struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

cublasLtHandle_t handle = nullptr;
// one plan (descriptors and the heuristic's algorithm) per shape: the heuristic query costs tens
// of microseconds, which a host-bound step would otherwise pay at every call
std::map<std::tuple<int64_t, int64_t, int64_t, bool>, Plan> plans;

}  // namespace

#define CHECK(call)                                                              \
  do {                                                                           \
    cublasStatus_t s_ = (call);                                                  \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                           \
      std::fprintf(stderr, "gelu_epilogue: %s failed: %d\n", #call, (int)s_);   \
      return (int)s_;                                                            \
    }                                                                            \
  } while (0)

extern "C" int gelu_aux_gemm(int64_t m, int64_t n, int64_t k, const void* x, const void* w,
                             const void* bias, void* y, void* aux, void* workspace,
                             size_t workspace_bytes, void* stream) {
  if (handle == nullptr) CHECK(cublasLtCreate(&handle));
  const bool has_bias = bias != nullptr;
  auto key = std::make_tuple(m, n, k, has_bias);
  auto it = plans.find(key);
  if (it == plans.end()) {
    Plan p;
    CHECK(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    cublasLtEpilogue_t ep = has_bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep));
    int64_t aux_ld = n;
    CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld,
                                         sizeof aux_ld));
    CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, k, n, k));
    CHECK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16BF, k, m, k));
    CHECK(cublasLtMatrixLayoutCreate(&p.d, CUDA_R_16BF, n, m, n));
    cublasLtMatmulPreference_t pref = nullptr;
    CHECK(cublasLtMatmulPreferenceCreate(&pref));
    CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                               &workspace_bytes, sizeof workspace_bytes));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    CHECK(cublasLtMatmulAlgoGetHeuristic(handle, p.op, p.a, p.b, p.d, p.d, pref, 1, &result,
                                         &found));
    cublasLtMatmulPreferenceDestroy(pref);
    if (found == 0) {
      std::fprintf(stderr, "gelu_epilogue: no cuBLASLt algorithm for m=%ld n=%ld k=%ld\n",
                   (long)m, (long)n, (long)k);
      return -1;
    }
    p.algo = result.algo;
    it = plans.emplace(key, p).first;
  }
  Plan& p = it->second;
  if (has_bias)
    CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                         sizeof bias));
  CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux,
                                       sizeof aux));
  const float alpha = 1.0f, beta = 0.0f;
  CHECK(cublasLtMatmul(handle, p.op, &alpha, w, p.a, x, p.b, &beta, y, p.d, y, p.d, &p.algo,
                       workspace, workspace_bytes, static_cast<cudaStream_t>(stream)));
  return 0;
}
