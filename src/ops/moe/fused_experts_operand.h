// An expert GEMM's A operand: steps 1 and 4 of the fused-experts pipeline (vLLM
// moe_kernel_quantize_input), which the reference (fused_experts_ref.cpp, widening the codes to
// f32) and the fast paths (fused_experts_cpu.cpp, fused_experts_cuda.cpp) share.
#pragma once

#include "fp8kit/tensor.h"
#include "ops/moe/fused_experts_args.h"

namespace fp8kit::ops {

struct ExpertOperand {
  Tensor values;  // FP8 codes, or the rows of hidden_states' dtype as they are; rows contiguous
  Tensor scale;   // kFp8W8A8: f32 [1] (per-tensor) or [rows, k / block_k] (block), contiguous; else undefined
};

// kFp8W8A8: per-tensor -> scaled_fp8_quant with `static_scale` (or one dynamic scale over all of
// x); block -> per_token_group_quant(x, block_k). Otherwise x as it is.
ExpertOperand quantize_expert_input(const FusedExpertsArgs& a, const Tensor& x, const Tensor& static_scale);

}  // namespace fp8kit::ops
