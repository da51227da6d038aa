// CPU reference of moe_sum (spec 1.10): the top-k reduction of the fused MoE, either in the
// scalar type with a rounding per add or in f32 with one rounding (MoeSumArgs). Tested by
// tests/cpu/test_moe_sum.cpp and through fused_experts (tests/cpu/test_fused_experts*.cpp).
#pragma once

#include "ops/moe/moe_sum_args.h"

namespace fp8kit::ops {

void moe_sum_ref(const MoeSumArgs& args);

}  // namespace fp8kit::ops
