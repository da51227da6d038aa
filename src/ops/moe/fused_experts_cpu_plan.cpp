// plan_cpu_fused_experts (fused_experts_cpu_plan.h).
#include "ops/moe/fused_experts_cpu_plan.h"

namespace fp8kit::ops::cpu {

FusedExpertsPlan plan_cpu_fused_experts(const FusedExpertsDesc& d, const Overrides& overrides) {
  FusedExpertsPlan plan;
  plan.isa = d.isa;
  if (overrides.cpu_backend == CpuBackend::kReference) {
    plan.reason = "FP8KIT_CPU_BACKEND=reference";
    return plan;
  }
  if (d.quant != ExpertQuant::kUnquantized && d.weight_dtype != DType::kE4M3FN) {
    plan.reason = "e4m3fnuz experts: the GEMM engine decodes e4m3fn only";
    return plan;
  }
  if (d.block && d.block_k % 8 != 0) {
    plan.reason = "block_k is not a multiple of 8";
    return plan;
  }
  plan.fast = true;
  return plan;
}

}  // namespace fp8kit::ops::cpu
