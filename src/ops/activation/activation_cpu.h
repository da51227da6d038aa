// The CPU side of silu_and_mul / gelu_and_mul: act_and_mul_cpu plans (plan_cpu_activation) and
// runs the reference or the AVX2 silu. The AVX2 silu evaluates the reference's formula
// T(T(x / (1 + exp(-x))) * up) with the same f32 operations, but exp(-x) correctly rounded to
// f32 (computed in double), where the reference calls the C library's expf: glibc's is not
// correctly rounded in 0.004% of inputs (it can be 0.50000006 ulp off), and there the two may
// differ, by at most one step of T (tests/cpu/test_activation_cpu.cpp).
#pragma once

#include "fp8kit/runtime/overrides.h"
#include "ops/activation/activation_args.h"
#include "ops/activation/activation_cpu_plan.h"

namespace fp8kit::ops {

void act_and_mul_cpu(const ActAndMulArgs& args, const Overrides& overrides, int num_threads);

namespace cpu {

// Executes a kAvx2Silu plan (kInternal without AVX2).
void run_silu_and_mul(const ActAndMulArgs& args, const ActivationPlan& plan);
// One row: out[i] = T(T(silu(x[i])) * x[d + i]), i < d (activation_cpu_avx2.cpp).
void silu_and_mul_row_avx2(const void* x, void* out, int64_t d, DType dtype);
// exp(x) correctly rounded to f32 for n values (the kernel's exp, for tests).
void exp_f32_avx2(const float* x, float* out, int64_t n);

}  // namespace cpu
}  // namespace fp8kit::ops
