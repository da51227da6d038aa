// plan_cpu_gemm: which CPU implementation serves a GEMM (scaled_mm, weight_only_mm, matmul_16bit,
// the fused MoE's expert GEMMs) and how: the exact reference, or the fast engine's kernel family
// (AVX-512-BF16 where every operand is e4m3fn or bf16, else AVX2, else portable), its shape (GEMV
// for decode-sized M, cache-blocked panels otherwise), the panel tiles and the thread count. Pure
// host code: the launch code only executes a plan.
// Tested by tests/cpu/test_gemm_cpu_plan.cpp.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/cpu_features.h"
#include "fp8kit/runtime/overrides.h"
#include "ops/gemm/gemm_cpu_problem.h"

namespace fp8kit::ops::cpu {

struct GemmDesc {
  int64_t m = 0, n = 0, k = 0;
  Operand a_type = Operand::kE4M3, b_type = Operand::kE4M3;
  bool blockwise = false;  // block scales: K chunks of block_k
  int64_t block_k = 0;
  // false when an operand is in a format the engine does not decode (e4m3fnuz): the reference.
  bool operands_supported = true;
  CpuIsa isa = CpuIsa::kPortable;  // the best family allowed (best_cpu_isa(), or lower in tests)
  int max_threads = 1;             // ForwardContext::num_threads()
};

enum class GemmKernel : uint8_t { kReference, kPortable, kAvx2, kAvx512Bf16 };
enum class GemmShape : uint8_t {
  kGemv,   // m <= kGemvMaxRows: weights streamed once, decoded in registers, N split over threads
  kPanel,  // weight panels decoded once into f32 and reused by every row of A
};

inline constexpr int64_t kGemvMaxRows = 8;

struct GemmPlan {
  GemmKernel kernel = GemmKernel::kReference;
  GemmShape shape = GemmShape::kPanel;
  int64_t panel_m = 0, panel_n = 0;  // kPanel: rows of A and of B one task covers
  int threads = 1;
  std::string_view reason;  // why the reference serves, when it does
};

GemmPlan plan_cpu_gemm(const GemmDesc& desc, const Overrides& overrides);

std::string_view gemm_kernel_name(GemmKernel kernel);

}  // namespace fp8kit::ops::cpu
