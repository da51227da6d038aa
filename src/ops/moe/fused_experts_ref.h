// CPU reference of fused_experts (include/fp8kit/ops/moe_experts.h, spec 1.10): the chunked
// Triton pipeline as a composition of the references: scaled_fp8_quant / per_token_group_quant,
// the grouped expert GEMM (fused_experts_gemm_ref), act_and_mul_ref and moe_sum_ref. Tested by
// tests/cpu/test_fused_experts*.cpp.
#pragma once

#include "ops/moe/fused_experts_args.h"

namespace fp8kit::ops {

void fused_experts_ref(const FusedExpertsArgs& args);

}  // namespace fp8kit::ops
