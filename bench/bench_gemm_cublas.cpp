// BF16 cuBLASLt GEMM of bench_gemm (bench_gemm_cublas.h). In cuBLAS's column-major terms the
// row-major problem y = x . w^T is y^T [N, M] = op(w) [N, K] . x^T [K, M] with op = transpose:
// w is the column-major K x N matrix (ld K), x the K x M one (ld K), y the N x M one (ld N).
#include "bench_gemm_cublas.h"

#include <fmt/format.h>

#include <stdexcept>

#include "bench_common.h"

namespace fp8kit::bench {
namespace {

void check_lt(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(fmt::format("{}: cuBLAS status {}", what, static_cast<int>(status)));
  }
}

}  // namespace

Bf16CublasLtGemm::Bf16CublasLtGemm() {
  check_lt(cublasLtCreate(&handle_), "cublasLtCreate");
  workspace_bytes_ = size_t(32) << 20;
  check_cuda(cudaMalloc(&workspace_, workspace_bytes_), "cudaMalloc(cuBLASLt workspace)");
}

Bf16CublasLtGemm::~Bf16CublasLtGemm() {
  release_problem();
  cudaFree(workspace_);
  cublasLtDestroy(handle_);
}

void Bf16CublasLtGemm::release_problem() {
  if (layout_w_) cublasLtMatrixLayoutDestroy(layout_w_);
  if (layout_x_) cublasLtMatrixLayoutDestroy(layout_x_);
  if (layout_y_) cublasLtMatrixLayoutDestroy(layout_y_);
  if (desc_) cublasLtMatmulDescDestroy(desc_);
  layout_w_ = layout_x_ = layout_y_ = nullptr;
  desc_ = nullptr;
}

void Bf16CublasLtGemm::prepare(int64_t m, int64_t n, int64_t k) {
  release_problem();
  check_lt(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  const cublasOperation_t trans = CUBLAS_OP_T, no_trans = CUBLAS_OP_N;
  check_lt(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof trans), "TRANSA");
  check_lt(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &no_trans, sizeof no_trans), "TRANSB");
  check_lt(cublasLtMatrixLayoutCreate(&layout_w_, CUDA_R_16BF, uint64_t(k), uint64_t(n), k), "layout w");
  check_lt(cublasLtMatrixLayoutCreate(&layout_x_, CUDA_R_16BF, uint64_t(k), uint64_t(m), k), "layout x");
  check_lt(cublasLtMatrixLayoutCreate(&layout_y_, CUDA_R_16BF, uint64_t(n), uint64_t(m), n), "layout y");

  cublasLtMatmulPreference_t pref = nullptr;
  check_lt(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  cublasLtMatmulHeuristicResult_t result{};
  int count = 0;
  cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                                &workspace_bytes_, sizeof workspace_bytes_);
  if (status == CUBLAS_STATUS_SUCCESS) {
    status = cublasLtMatmulAlgoGetHeuristic(handle_, desc_, layout_w_, layout_x_, layout_y_, layout_y_, pref, 1,
                                            &result, &count);
  }
  cublasLtMatmulPreferenceDestroy(pref);
  check_lt(status, "cublasLtMatmulAlgoGetHeuristic");
  if (count < 1) throw std::runtime_error(fmt::format("cuBLASLt has no bf16 algorithm for {}x{}x{}", m, n, k));
  algo_ = result.algo;
  int algo_id = -1, tile = -1, stages = -1;
  size_t written = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&algo_, CUBLASLT_ALGO_CONFIG_ID, &algo_id, sizeof algo_id, &written);
  cublasLtMatmulAlgoConfigGetAttribute(&algo_, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &written);
  cublasLtMatmulAlgoConfigGetAttribute(&algo_, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages, &written);
  algo_note_ = fmt::format("cuBLASLt algo {} tile {} stages {} waves {:.2f}", algo_id, tile, stages, result.wavesCount);
}

void Bf16CublasLtGemm::run(const void* x, const void* w, void* y, cudaStream_t stream) {
  const float alpha = 1.0f, beta = 0.0f;
  check_lt(cublasLtMatmul(handle_, desc_, &alpha, w, layout_w_, x, layout_x_, &beta, y, layout_y_, y, layout_y_, &algo_,
                          workspace_, workspace_bytes_, stream),
           "cublasLtMatmul");
}

}  // namespace fp8kit::bench
