// quantize_expert_input (fused_experts_operand.h).
#include "ops/moe/fused_experts_operand.h"

#include "core/check.h"
#include "fp8kit/ops/quant.h"

namespace fp8kit::ops {

ExpertOperand quantize_expert_input(const FusedExpertsArgs& a, const Tensor& x, const Tensor& static_scale) {
  if (a.quant != ExpertQuant::kFp8W8A8) return {x, Tensor()};
  QuantResult q;
  if (a.block) {
    PerTokenGroupQuantOptions o;
    o.group_size = a.block_k;
    o.out_dtype = a.w1.dtype();
    q = per_token_group_quant(*a.ctx, x, o);
  } else {
    ScaledFp8QuantOptions o;
    o.scale = static_scale;
    o.out_dtype = a.w1.dtype();
    q = scaled_fp8_quant(*a.ctx, x, o);
  }
  FP8KIT_CHECK(q.q.is_contiguous(), ErrorCode::kInternal, "fused_experts: quantized operand not contiguous");
  return {q.q, q.scale.contiguous()};
}

}  // namespace fp8kit::ops
