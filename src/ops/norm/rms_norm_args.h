// Argument block of rms_norm / fused_add_rms_norm (include/fp8kit/ops/norm.h), validated by
// rms_norm.cpp. The CPU reference (rms_norm_ref.h) takes it, and a CUDA launcher will take the
// same struct. Pointers live on the op's device.
#pragma once

#include <cstdint>

#include "fp8kit/dtype.h"

namespace fp8kit::ops {

struct RmsNormArgs {
  int64_t rows = 0, hidden = 0;
  const void* x = nullptr;  // [rows, hidden] of dtype, row r at x + r * x_row_stride
  int64_t x_row_stride = 0;
  void* residual = nullptr;      // fused add only: [rows, hidden], contiguous, updated in place
  const void* weight = nullptr;  // [hidden]
  void* out = nullptr;           // [rows, hidden], row r at out + r * out_row_stride (may equal x)
  int64_t out_row_stride = 0;
  DType dtype = DType::kBF16;  // f32 | f16 | bf16, of every tensor
  float eps = 1e-6f;
};

}  // namespace fp8kit::ops
