// Which implementation serves a scaled_mm problem, decided as data by host code (DeepGEMM's habit:
// a plain function of the problem, unit-tested on the CPU): GemmDesc -> GemmConfig. Each backend
// states the problems it can serve; the first that can, in order of preference, is chosen, and the
// reason for every rejection is kept for diagnostics.
#pragma once

#include <cstdint>
#include <string>

#include "ops/gemm/gemm_args.h"

namespace fp8kit::ops {

enum class GemmBackend : uint8_t {
  kCublasLt,  // cuBLASLt FP8 matmul: per-tensor, outer-vector (token x channel), 128x128 block modes
  kFallback,  // fp8kit's generic CUDA kernel: any shape, stride, scaling and block size (slow)
};
const char* gemm_backend_name(GemmBackend backend);

struct GemmDesc {
  int64_t m = 0, n = 0, k = 0;
  ScaleKind scale_a = ScaleKind::kTensor, scale_b = ScaleKind::kTensor;
  int64_t block_n = 0, block_k = 0;
  DType out_dtype = DType::kBF16;
  bool bias = false;
  int arch = 0;  // compute capability, e.g. 90
  // Strides in elements and base addresses modulo 16 bytes, as cuBLASLt requires them aligned.
  int64_t lda = 0, ldb = 0, ldc = 0;
  bool pointers_16b_aligned = true;
  // Block scaling: whether the activation scales are [K/bk, M] with M contiguous (the layout
  // cuBLASLt's VEC128 mode reads, after removing any padding of the leading dimension).
  bool scale_a_column_major = false;
};

GemmDesc describe(const ScaledMmArgs& args, int arch);

struct GemmConfig {
  GemmBackend backend = GemmBackend::kFallback;
  std::string reason;  // why the preferred backends were passed over ("" when cuBLASLt serves it)
};

// FP8KIT_GEMM_BACKEND=cublaslt|fallback forces a backend (tests, benchmarks); a forced backend
// that cannot serve the problem is an error naming why.
GemmConfig select_gemm(const GemmDesc& desc);

// "" when cuBLASLt can serve `desc`, otherwise why not.
std::string cublaslt_rejects(const GemmDesc& desc);

}  // namespace fp8kit::ops
