// CPU reference of silu_and_mul / gelu_and_mul (vLLM csrc/activation_kernels.cu, spec 1.10):
// out = T(T(act(float(gate))) * up), the activation in f32 rounded to T, then the product
// (exact in f32 for 16-bit T) rounded to T. Tested by tests/cpu/test_moe_activation.cpp.
#pragma once

#include "ops/activation/activation_args.h"

namespace fp8kit::ops {

void act_and_mul_ref(const ActAndMulArgs& args);

// The activations on one f32 value, before the rounding to T (shared with the fused MoE reference).
float silu_f32(float x);
float gelu_f32(float x);

}  // namespace fp8kit::ops
