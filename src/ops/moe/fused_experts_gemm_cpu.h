// One grouped GEMM of the fused MoE on the CPU (GEMM1 or GEMM2 of fused_experts_cpu.cpp): the
// routed slots sorted by expert, and each expert's slots run through the GEMM engine as one
// problem whose A rows are gathered by index and whose output rows are scattered back to the
// slots (the Triton fused_moe_kernel's epilogue, as expert_gemm_ref: the routed weight into the
// f32 accumulator before the per-tensor scales). Slots of experts of other ranks get zero rows.
#pragma once

#include <cstdint>

#include "core/cpu_features.h"
#include "fp8kit/runtime/overrides.h"
#include "fp8kit/tensor.h"
#include "ops/moe/fused_experts_args.h"

namespace fp8kit::ops {

struct ExpertGemmCpuArgs {
  int64_t num_slots = 0, slots_per_row = 1;  // A row of slot s: s / slots_per_row
  const int32_t* slot_expert = nullptr;      // [num_slots]: local expert or -1
  const float* slot_weight = nullptr;        // [num_slots], or null
  const Tensor* a = nullptr;                 // [rows, k]: FP8 codes (kFp8W8A8) or hidden_states' dtype
  const Tensor* a_scale = nullptr;           // kFp8W8A8: f32 [1] or [rows, k / block_k], contiguous
  const Tensor* w = nullptr;                 // [E, n, k], last dimension contiguous
  const Tensor* w_scale = nullptr;           // contiguous: [E] or [E, nb, kb]; undefined if unquantized
  ExpertQuant quant = ExpertQuant::kUnquantized;
  bool block = false;
  int64_t block_n = 0, block_k = 0;
  Tensor* out = nullptr;  // [num_slots, n] of the output dtype, contiguous
};

void expert_gemms_cpu(const ExpertGemmCpuArgs& args, CpuIsa isa, const Overrides& overrides, int num_threads);

}  // namespace fp8kit::ops
