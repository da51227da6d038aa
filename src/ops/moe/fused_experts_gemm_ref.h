// CPU reference of one grouped GEMM of the fused MoE (the Triton fused_moe_kernel, spec 1.10):
// every routed slot multiplies its A row with its expert's weight, with the kernel's epilogue
// order (routed weight into the f32 accumulator before the scales). Used by fused_experts_ref;
// tested through tests/cpu/test_fused_experts*.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "fp8kit/tensor.h"
#include "ops/moe/fused_experts_args.h"

namespace fp8kit::ops {

enum class ExpertGemmScaling : uint8_t {
  kNone,       // unquantized, or weights already dequantized (weight-only)
  kPerTensor,  // acc * a_scale[0] * b_scale[e]
  kBlock,      // per K block: dot * a_scale[row, kb] * b_scale[e, n / block_n, kb]
};

struct ExpertGemmArgs {
  int64_t num_slots = 0, n = 0, k = 0;
  int64_t slots_per_row = 1;             // A row of slot s: s / slots_per_row (top_k in GEMM1, 1 in GEMM2)
  const float* a = nullptr;              // [num_slots / slots_per_row, k]: decoded FP8 or widened values
  const float* b = nullptr;              // [E, n, k] (expert_weights_f32)
  const int32_t* slot_expert = nullptr;  // [num_slots]: local expert, or -1 for a zero row
  const float* slot_weight = nullptr;    // [num_slots] routed weights multiplied into acc, or null
  ExpertGemmScaling scaling = ExpertGemmScaling::kNone;
  const float* a_scale = nullptr;  // kPerTensor: [1]; kBlock: [rows, k / block_k] row-major
  const float* b_scale = nullptr;  // kPerTensor: [E]; kBlock: [E, ceil(n / block_n), ceil(k / block_k)] contiguous
  int64_t block_n = 0, block_k = 0;
  void* out = nullptr;  // [num_slots, n] of out_dtype, contiguous
  DType out_dtype = DType::kBF16;
};

void expert_gemm_ref(const ExpertGemmArgs& args);

// The local experts' weights w [E, n, k] as contiguous f32: decoded FP8 codes (kFp8W8A8: the
// scales stay separate), f32(decode * scale) (kWeightOnly, per-tensor [E] or block scales), or
// the widened values (kUnquantized).
std::vector<float> expert_weights_f32(const Tensor& w, ExpertQuant quant, const Tensor& scale, bool block,
                                      int64_t block_n, int64_t block_k);

// The values of an FP8 or 16-bit/f32 tensor [rows, k] (last dimension contiguous) as f32.
std::vector<float> values_f32(const Tensor& t);

}  // namespace fp8kit::ops
