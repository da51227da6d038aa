// Argument block of moe_sum (include/fp8kit/ops/moe_experts.h), validated by moe_sum.cpp and
// filled directly by the fused MoE reference. The CPU reference (moe_sum_ref.cpp) and a CUDA
// launcher take this struct.
#pragma once

#include <cstdint>

#include "fp8kit/dtype.h"

namespace fp8kit::ops {

struct MoeSumArgs {
  int64_t m = 0, top_k = 0, d = 0;
  const void* input = nullptr;  // [m, top_k, d] of dtype, contiguous
  void* out = nullptr;          // [m, d] of dtype, contiguous
  DType dtype = DType::kBF16;   // f32 | f16 | bf16
  // true: vLLM's moe_sum kernel (top_k 2..4): x = 0; x += in[k] in the scalar type, rounding to
  // it after every add. false: at::sum's rule: accumulate in f32 (k = 0, 1, ...), round once.
  bool accumulate_in_scalar = false;
  // CUDA only (the fused MoE's split-K GEMM2): with splits > 1 the slot values are not `input`
  // but T(sum over s = 0, 1, ... of partials[s * m * top_k * d + slot * d + c]) (f32, added in
  // order, rounded to dtype once), then summed over k as above.
  const float* partials = nullptr;
  int64_t splits = 1;
  // CUDA only (the fused MoE's sorted prefill path, whose GEMM2 writes its rows in sorted order):
  // slot s's values are row row_of_slot[s] of `input` ([rows, d] of dtype, contiguous), zeros
  // where it is -1. Not with partials.
  const int32_t* row_of_slot = nullptr;
};

// The rule moe_sum uses for a given top_k (spec 1.10: its own kernel for 2, 3 and 4).
inline bool moe_sum_accumulates_in_scalar(int64_t top_k) { return top_k >= 2 && top_k <= 4; }

}  // namespace fp8kit::ops
