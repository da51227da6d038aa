// UnquantizedFusedMoEMethod (include/fp8kit/layers/unquantized_fused_moe_method.h): 16-bit experts
// through ops::fused_experts. Tested by tests/cpu/test_fused_moe_forward.cpp.
#include "fp8kit/layers/unquantized_fused_moe_method.h"

#include "core/check.h"
#include "fp8kit/layers/fused_moe.h"
#include "fp8kit/ops/moe_experts.h"

namespace fp8kit {
namespace {

Parameter expert_weight(std::string name, const Shape& shape, DType dtype, Device device) {
  Parameter p;
  p.name = std::move(name);
  p.kind = ParameterKind::kModelWeight;
  p.data = Tensor::empty(shape, dtype, device);
  return p;
}

}  // namespace

void UnquantizedFusedMoEMethod::create_weights(FusedMoE& layer, int64_t num_experts, int64_t hidden_size,
                                               int64_t intermediate_size_per_partition, DType params_dtype) {
  const int64_t e = num_experts, h = hidden_size, i = intermediate_size_per_partition;
  layer.register_parameter(expert_weight("w13_weight", {e, 2 * i, h}, params_dtype, layer.device()));
  layer.register_parameter(expert_weight("w2_weight", {e, h, i}, params_dtype, layer.device()));
}

void UnquantizedFusedMoEMethod::process_weights_after_loading(const ForwardContext&, FusedMoE& layer) {
  w13_ = layer.parameter("w13_weight").data;
  w2_ = layer.parameter("w2_weight").data;
}

Tensor UnquantizedFusedMoEMethod::apply(const ForwardContext& ctx, FusedMoE& layer, const Tensor& x,
                                        const Tensor& router_logits, const FusedMoEApplyOptions& options) {
  FP8KIT_CHECK_ARG(w13_.defined(), "{}: process_weights_after_loading must run before the forward pass",
                   layer.prefix());
  const ops::TopkResult topk = FusedMoE::select_experts(ctx, x, router_logits, options);
  ops::FusedExpertsOptions o;
  o.inplace = true;
  o.activation = options.activation;
  o.apply_router_weight_on_input = options.apply_router_weight_on_input;
  o.global_num_experts = options.global_num_experts;
  o.expert_map = options.expert_map;
  return ops::fused_experts(ctx, x, w13_, w2_, topk.weights, topk.ids, o);
}

}  // namespace fp8kit
