// CPU reference of fused_experts (fused_experts_ref.h): per chunk, quantize -> GEMM1 ->
// activation -> quantize -> GEMM2 -> top-k sum, each step the unfused reference.
#include "ops/moe/fused_experts_ref.h"

#include <vector>

#include "core/check.h"
#include "fp8kit/ops/quant.h"
#include "ops/activation/activation_ref.h"
#include "ops/moe/fused_experts_gemm_ref.h"
#include "ops/moe/fused_experts_operand.h"
#include "ops/moe/moe_sum_ref.h"

namespace fp8kit::ops {
namespace {

// One GEMM operand as the kernel sees it: values (decoded FP8 codes or the 16-bit values as f32)
// and, when quantized, the activation scales with their layout.
struct Operand {
  std::vector<float> values;
  Tensor scale;  // f32 [1] (per-tensor) or [rows, k / block_k] row-major (block); undefined if not quantized
  ExpertGemmScaling scaling = ExpertGemmScaling::kNone;
};

// Step 1 / 4 of the pipeline (vLLM moe_kernel_quantize_input): per-tensor -> scaled_fp8_quant
// with the static scale or one dynamic scale over all of x; block -> per_token_group_quant(x, bk).
Operand prepare_operand(const FusedExpertsArgs& a, const Tensor& x, const Tensor& static_scale) {
  const ExpertOperand q = quantize_expert_input(a, x, static_scale);
  Operand op;
  op.values = values_f32(q.values);
  op.scale = q.scale;
  if (a.quant == ExpertQuant::kFp8W8A8) op.scaling = a.block ? ExpertGemmScaling::kBlock : ExpertGemmScaling::kPerTensor;
  return op;
}

// Local expert of every routed slot (global id -> expert_map), checked before anything is written.
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

ExpertGemmArgs gemm_args(const FusedExpertsArgs& a, const Operand& x, const std::vector<float>& w, const Tensor& w_scale,
                         int64_t n, int64_t k) {
  ExpertGemmArgs g;
  g.n = n;
  g.k = k;
  g.a = x.values.data();
  g.b = w.data();
  g.scaling = x.scaling;
  g.a_scale = x.scale.defined() ? x.scale.data<float>() : nullptr;
  g.b_scale = x.scaling != ExpertGemmScaling::kNone ? w_scale.data<float>() : nullptr;
  g.block_n = a.block_n;
  g.block_k = a.block_k;
  g.out_dtype = a.hidden_states.dtype();
  return g;
}

}  // namespace

void fused_experts_ref(const FusedExpertsArgs& a) {
  const int64_t h = a.hidden_size, inter = a.intermediate_size, top_k = a.top_k;
  const DType dtype = a.hidden_states.dtype();
  const std::vector<int32_t> experts = slot_experts(a);
  const Tensor weights = a.topk_weights.contiguous();
  // Weights decoded once for all chunks; FP8 scales stay separate (the kernel's epilogue).
  const std::vector<float> w1 = expert_weights_f32(a.w1, a.quant, a.w1_scale, a.block, a.block_n, a.block_k);
  const std::vector<float> w2 = expert_weights_f32(a.w2, a.quant, a.w2_scale, a.block, a.block_n, a.block_k);
  const Tensor w1_scale = a.w1_scale.defined() ? a.w1_scale.contiguous() : Tensor();
  const Tensor w2_scale = a.w2_scale.defined() ? a.w2_scale.contiguous() : Tensor();

  for (int64_t t0 = 0; t0 < a.num_tokens; t0 += a.chunk_size) {
    const int64_t m = std::min(a.chunk_size, a.num_tokens - t0), slots = m * top_k;
    const int32_t* chunk_experts = experts.data() + t0 * top_k;
    const float* chunk_weights = weights.data<float>() + t0 * top_k;

    // (1) quantize A; (2) GEMM1 -> C1 [slots, 2I]. The operand is copied out of hidden_states
    // before anything is written, so the in-place variant reads the original chunk.
    const Operand x1 = prepare_operand(a, a.hidden_states.narrow(0, t0, m), a.a1_scale);
    Tensor c1 = Tensor::empty({slots, 2 * inter}, dtype);
    ExpertGemmArgs g1 = gemm_args(a, x1, w1, w1_scale, 2 * inter, h);
    g1.num_slots = slots;
    g1.slots_per_row = top_k;
    g1.slot_expert = chunk_experts;
    g1.slot_weight = a.apply_router_weight_on_input ? chunk_weights : nullptr;
    g1.out = c1.data_ptr();
    expert_gemm_ref(g1);

    // (3) activation -> C2 [slots, I]
    Tensor c2 = Tensor::empty({slots, inter}, dtype);
    act_and_mul_ref(gated_activation_args(a, c1, c2));

    // (4) quantize C2 over the whole chunk; (5) GEMM2 -> C3 [slots, H], one A row per slot.
    const Operand x2 = prepare_operand(a, c2, a.a2_scale);
    Tensor c3 = Tensor::empty({slots, h}, dtype);
    ExpertGemmArgs g2 = gemm_args(a, x2, w2, w2_scale, h, inter);
    g2.num_slots = slots;
    g2.slots_per_row = 1;
    g2.slot_expert = chunk_experts;
    g2.slot_weight = a.apply_router_weight_on_input ? nullptr : chunk_weights;
    g2.out = c3.data_ptr();
    expert_gemm_ref(g2);

    // (6) out[chunk] = sum over top_k. The weight-only (Marlin) path ends in torch.sum.
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

}  // namespace fp8kit::ops
