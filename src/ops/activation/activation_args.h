// Argument block of the gated activations silu_and_mul / gelu_and_mul (include/fp8kit/ops/
// moe_experts.h), validated by activation.cpp. The CPU reference (activation_ref.cpp) and a CUDA
// launcher take this struct, so one value drives both in the tests.
#pragma once

#include <cstdint>

#include "fp8kit/dtype.h"

namespace fp8kit::ops {

enum class GatedActivation : uint8_t {
  kSilu,  // x / (1 + exp(-x))
  kGelu,  // the erf form: x * 0.5 * (1 + erf(x / sqrt(2)))
};

struct ActAndMulArgs {
  int64_t rows = 0, d = 0;
  const void* x = nullptr;  // [rows, 2d] of dtype, row r at x + r * ldx (gate: [0, d), up: [d, 2d))
  int64_t ldx = 0;
  void* out = nullptr;  // [rows, d] of dtype, row r at out + r * ldo
  int64_t ldo = 0;
  DType dtype = DType::kBF16;  // f32 | f16 | bf16
  GatedActivation activation = GatedActivation::kSilu;
};

}  // namespace fp8kit::ops
