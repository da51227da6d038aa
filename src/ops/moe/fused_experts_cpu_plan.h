// plan_cpu_fused_experts: whether the fast CPU pipeline (fused_experts_cpu.cpp: the engine's
// GEMMs per expert segment, the fast quantization and silu) or the reference serves a fused MoE
// call. Each expert GEMM is then planned by plan_cpu_gemm. Pure host code. Tested by
// tests/cpu/test_fused_experts_cpu.cpp.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/cpu_features.h"
#include "fp8kit/runtime/overrides.h"
#include "ops/moe/fused_experts_args.h"

namespace fp8kit::ops::cpu {

struct FusedExpertsDesc {
  ExpertQuant quant = ExpertQuant::kUnquantized;
  DType weight_dtype = DType::kBF16;
  bool block = false;
  int64_t block_k = 0;
  CpuIsa isa = CpuIsa::kPortable;
};

struct FusedExpertsPlan {
  bool fast = false;
  CpuIsa isa = CpuIsa::kPortable;  // the family the expert GEMMs may use
  std::string_view reason;         // why the reference serves, when it does
};

FusedExpertsPlan plan_cpu_fused_experts(const FusedExpertsDesc& desc, const Overrides& overrides);

}  // namespace fp8kit::ops::cpu
