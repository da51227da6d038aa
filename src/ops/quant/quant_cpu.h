// The CPU side of the activation quantization ops: scaled_fp8_quant_cpu and
// per_token_group_quant_cpu take the op's validated args, plan (plan_cpu_quant) and run the
// reference or the AVX2 kernels, which are bit-exact with it (tests/cpu/test_quant_cpu.cpp
// compares bytes). The op entries (quant.cpp) pass their context's overrides and threads.
#pragma once

#include "fp8kit/runtime/overrides.h"
#include "ops/quant/quant_args.h"
#include "ops/quant/quant_cpu_plan.h"

namespace fp8kit::ops {

void scaled_fp8_quant_cpu(const ScaledFp8QuantArgs& args, const Overrides& overrides, int num_threads);
void per_token_group_quant_cpu(const PerTokenGroupQuantArgs& args, const Overrides& overrides, int num_threads);

namespace cpu {

// Executes a plan of kAvx2 (kInternal on a CPU without AVX2).
void run_scaled_fp8_quant(const ScaledFp8QuantArgs& args, const QuantPlan& plan);
void run_per_token_group_quant(const PerTokenGroupQuantArgs& args, const QuantPlan& plan);

// The AVX2 element kernels (quant_cpu_avx2.cpp), for runs of n contiguous elements of T:
//   absmax_bits: max |x| as abs_bits (quant_encode.h), NaN ignored
//   quantize_mul: out = cvt(clamp(x * inv))       (spec 2.2 rule 1)
//   quantize_div: out = cvt(clamp(x / s)), |x| <= amax (rules 3, 4; the reciprocal-corrected
//                 division of quant_encode.h where divisor_is_regular, else a true division)
struct QuantKernels {
  uint32_t (*absmax_bits)(const void* x, int64_t n);
  void (*quantize_mul)(const void* x, int64_t n, float inv, float fp8_max, uint8_t* out);
  void (*quantize_div)(const void* x, int64_t n, float s, float amax, float fp8_max, uint8_t* out);
};
// in: f32 | f16 | bf16; fnuz: e4m3fnuz output (else e4m3fn).
const QuantKernels& quant_kernels_avx2(DType in, bool fnuz);

}  // namespace cpu
}  // namespace fp8kit::ops
