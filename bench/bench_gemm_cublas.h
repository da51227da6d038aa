// The BF16 GEMM of bench_gemm through cuBLASLt: y[M, N] = x[M, K] . w[N, K]^T, all bf16 and
// row-major, f32 accumulation, the heuristic's first algorithm with a 32 MiB workspace (the
// "TN" problem torch.matmul(x, w.t()) hands to cuBLAS). The physical reference for FP8 speedups
// and for the weight-only FP8 comparison. Implemented in bench_gemm_cublas.cpp.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

namespace fp8kit::bench {

class Bf16CublasLtGemm {
 public:
  Bf16CublasLtGemm();
  ~Bf16CublasLtGemm();
  Bf16CublasLtGemm(const Bf16CublasLtGemm&) = delete;
  Bf16CublasLtGemm& operator=(const Bf16CublasLtGemm&) = delete;

  // Sets up descriptors and picks the algorithm for one problem size (throws if none exists).
  void prepare(int64_t m, int64_t n, int64_t k);
  // Enqueues y = x . w^T on `stream` for the prepared size.
  void run(const void* x, const void* w, void* y, cudaStream_t stream);
  // What the heuristic chose, e.g. "algo 66 tile 20 stages 21 wave 1.00".
  const std::string& algo_note() const { return algo_note_; }

 private:
  void release_problem();

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t layout_w_ = nullptr, layout_x_ = nullptr, layout_y_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  std::string algo_note_;
};

}  // namespace fp8kit::bench
