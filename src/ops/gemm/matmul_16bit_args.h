// Argument block of matmul_16bit (include/fp8kit/ops/gemm.h): raw pointers and strides already
// validated by matmul_16bit.cpp; the CPU reference and the CUDA path take the same value.
#pragma once

#include <cstddef>
#include <cstdint>

#include "fp8kit/dtype.h"
#include "fp8kit/stream.h"

namespace fp8kit::ops {

struct Matmul16Args {
  int64_t m = 0, n = 0, k = 0;
  DType dtype = DType::kBF16;  // bf16 | f16 | f32: x, w, bias and out
  const void* x = nullptr;     // [m, k], row i at x + i * ldx
  int64_t ldx = 0;
  const void* w = nullptr;     // [n, k], row j at w + j * ldw
  int64_t ldw = 0;
  const void* bias = nullptr;  // [n] or null
  void* out = nullptr;         // [m, n], row i at out + i * ldc
  int64_t ldc = 0;
  // cuBLASLt's scratch on CUDA: kMatmul16LtWorkspaceBytes from the caller context's Workspace.
  void* lt_workspace = nullptr;
  int64_t lt_workspace_bytes = 0;
};

inline constexpr int64_t kMatmul16LtWorkspaceBytes = int64_t(8) << 20;

// y = round_out(sum_k x * w + bias): products and sums in double, one rounding at the end.
void matmul_16bit_ref(const Matmul16Args& args);

#if FP8KIT_WITH_CUDA
void matmul_16bit_cuda(const Matmul16Args& args, Stream stream);
#else
inline constexpr std::nullptr_t matmul_16bit_cuda = nullptr;  // detail::route reports the missing backend
#endif

}  // namespace fp8kit::ops
