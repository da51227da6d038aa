// fused_experts on the CPU (fused_experts_cpu.h): per chunk, quantize -> GEMM1 per expert ->
// silu/gelu -> quantize -> GEMM2 per expert -> top-k sum, the steps of fused_experts_ref.cpp.
#include "ops/moe/fused_experts_cpu.h"

#include <vector>

#include "core/check.h"
#include "core/parallel.h"
#include "fp8kit/ops/quant.h"
#include "ops/activation/activation_cpu.h"
#include "ops/moe/fused_experts_cpu_plan.h"
#include "ops/moe/fused_experts_operand.h"
#include "ops/moe/fused_experts_gemm_cpu.h"
#include "ops/moe/fused_experts_ref.h"
#include "ops/moe/moe_sum_ref.h"

namespace fp8kit::ops {
namespace {

// Local expert of every routed slot, checked before anything is written (the reference's texts).
std::vector<int32_t> slot_experts(const FusedExpertsArgs& a) {
  const Tensor ids = a.topk_ids.contiguous();
  const Tensor map = a.expert_map.defined() ? a.expert_map.contiguous() : Tensor();
  std::vector<int32_t> out(size_t(ids.numel()));
  for (int64_t s = 0; s < ids.numel(); ++s) {
    const int64_t id = ids.dtype() == DType::kI64 ? ids.data<int64_t>()[s] : ids.data<int32_t>()[s];
    FP8KIT_CHECK_ARG(id >= 0 && id < a.global_num_experts,
                     "fused_experts: `topk_ids` holds expert {} (token {}), outside [0, global_num_experts = {})", id,
                     s / a.top_k, a.global_num_experts);
    const int64_t local = map.defined() ? map.data<int32_t>()[id] : id;
    FP8KIT_CHECK_ARG(local >= -1 && local < a.num_experts,
                     "fused_experts: expert {} maps to local expert {}, outside [-1, E = {})", id, local, a.num_experts);
    out[size_t(s)] = int32_t(local);
  }
  return out;
}

void run_fast(const FusedExpertsArgs& a, CpuIsa isa, const Overrides& overrides, int threads) {
  const int64_t h = a.hidden_size, inter = a.intermediate_size, top_k = a.top_k;
  const DType dtype = a.hidden_states.dtype();
  const std::vector<int32_t> experts = slot_experts(a);
  const Tensor weights = a.topk_weights.contiguous();
  const Tensor w1_scale = a.w1_scale.defined() ? a.w1_scale.contiguous() : Tensor();
  const Tensor w2_scale = a.w2_scale.defined() ? a.w2_scale.contiguous() : Tensor();
  ExpertGemmCpuArgs g;
  g.quant = a.quant;
  g.block = a.block;
  g.block_n = a.block_n;
  g.block_k = a.block_k;
  for (int64_t t0 = 0; t0 < a.num_tokens; t0 += a.chunk_size) {
    const int64_t m = std::min(a.chunk_size, a.num_tokens - t0), slots = m * top_k;
    const int32_t* chunk_experts = experts.data() + t0 * top_k;
    const float* chunk_weights = weights.data<float>() + t0 * top_k;
    g.num_slots = slots;
    g.slot_expert = chunk_experts;

    // (1) quantize A; (2) GEMM1 -> C1 [slots, 2I]. The in-place variant writes the chunk's rows
    // of hidden_states only in step 6, after GEMM1 has read them.
    const ExpertOperand x1 = quantize_expert_input(a, a.hidden_states.narrow(0, t0, m), a.a1_scale);
    Tensor c1 = Tensor::empty({slots, 2 * inter}, dtype);
    g.slots_per_row = top_k;
    g.slot_weight = a.apply_router_weight_on_input ? chunk_weights : nullptr;
    g.a = &x1.values;
    g.a_scale = &x1.scale;
    g.w = &a.w1;
    g.w_scale = &w1_scale;
    g.out = &c1;
    expert_gemms_cpu(g, isa, overrides, threads);

    // (3) activation -> C2 [slots, I]
    Tensor c2 = Tensor::empty({slots, inter}, dtype);
    act_and_mul_cpu(gated_activation_args(a, c1, c2), overrides, threads);

    // (4) quantize C2 over the whole chunk; (5) GEMM2 -> C3 [slots, H], one A row per slot.
    const ExpertOperand x2 = quantize_expert_input(a, c2, a.a2_scale);
    Tensor c3 = Tensor::empty({slots, h}, dtype);
    g.slots_per_row = 1;
    g.slot_weight = a.apply_router_weight_on_input ? nullptr : chunk_weights;
    g.a = &x2.values;
    g.a_scale = &x2.scale;
    g.w = &a.w2;
    g.w_scale = &w2_scale;
    g.out = &c3;
    expert_gemms_cpu(g, isa, overrides, threads);

    // (6) out[chunk] = sum over top_k; the weight-only (Marlin) path ends in torch.sum.
    MoeSumArgs sum;
    sum.m = m;
    sum.top_k = top_k;
    sum.d = h;
    sum.input = c3.data_ptr();
    sum.out = a.out.narrow(0, t0, m).data_ptr();
    sum.dtype = dtype;
    sum.accumulate_in_scalar = a.quant != ExpertQuant::kWeightOnly && moe_sum_accumulates_in_scalar(top_k);
    moe_sum_ref(sum);
  }
}

}  // namespace

void fused_experts_cpu(const FusedExpertsArgs& args, const Overrides& overrides, int num_threads) {
  cpu::FusedExpertsDesc d;
  d.quant = args.quant;
  d.weight_dtype = args.w1.dtype();
  d.block = args.block;
  d.block_k = args.block_k;
  d.isa = best_cpu_isa();
  const cpu::FusedExpertsPlan plan = cpu::plan_cpu_fused_experts(d, overrides);
  if (!plan.fast) return fused_experts_ref(args);
  run_fast(args, plan.isa, overrides, num_threads);
}

}  // namespace fp8kit::ops
