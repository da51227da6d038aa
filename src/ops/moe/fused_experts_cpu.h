// fused_experts on the CPU: the reference's chunked pipeline (fused_experts_ref.cpp, spec 1.10)
// with the fast ops: activations quantized by the fast (bit-exact) quantization, each expert's
// slots through the GEMM engine as one problem (its activation rows gathered by index, its
// outputs scattered to their slots), the epilogue of the Triton kernel (routed weight before the
// per-tensor scales; per K block fma(partial * a_s, b_s, acc)), the AVX2 silu, moe_sum_ref. Each
// row's result does not depend on how many slots its expert got, so chunking and expert
// parallelism give the reference's bits wherever its scales do not depend on the chunk.
// Weight-only experts factor the dequantization out of the sums (as weight_only_mm_cpu). Tested
// by tests/cpu/test_fused_experts_cpu.cpp and every tests/cpu/test_fused_experts*.cpp.
#pragma once

#include "fp8kit/runtime/overrides.h"
#include "ops/moe/fused_experts_args.h"

namespace fp8kit::ops {

void fused_experts_cpu(const FusedExpertsArgs& args, const Overrides& overrides, int num_threads);

}  // namespace fp8kit::ops
