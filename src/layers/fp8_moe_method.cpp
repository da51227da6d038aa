// Fp8MoEMethod (include/fp8kit/layers/fp8_moe_method.h; spec 1.8): the weight-only decision,
// create_weights with the spec's block errors and 1.0 defaults, and apply. The post-processing is
// in fp8_moe_method_process.cpp. Tested by tests/cpu/test_fp8_moe_method.cpp and
// tests/cpu/test_fused_moe_forward.cpp.
#include "fp8kit/layers/fp8_moe_method.h"

#include <cstdlib>

#include "core/check.h"
#include "core/checked_math.h"
#include "fp8kit/layers/fp8_config.h"
#include "fp8kit/layers/fused_moe.h"
#include "fp8kit/ops/moe_experts.h"
#include "fp8kit/platform.h"

namespace fp8kit {
namespace {

Tensor ones_f32(const Shape& shape, Device device) {
  Tensor t = Tensor::empty(shape, DType::kF32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = 1.0f;
  return t.to(device);
}

Parameter make_parameter(std::string name, ParameterKind kind, Tensor data) {
  Parameter p;
  p.name = std::move(name);
  p.kind = kind;
  p.data = std::move(data);
  return p;
}

}  // namespace

Fp8MoEMethod::Fp8MoEMethod(std::shared_ptr<const Fp8Config> config)
    : config_(std::move(config)), block_quant_(config_->weight_block_size.has_value()) {}

bool Fp8MoEMethod::use_weight_only(const FusedMoE& layer) const {
  // The spec's VLLM_TEST_FORCE_FP8_MARLIN, shared with Fp8LinearMethod.
  if (layer.options().force_weight_only) return true;
  return layer.device().is_cuda() && !has_device_capability(89, layer.device().index);
}

const PreparedFp8MoE& Fp8MoEMethod::prepared() const {
  FP8KIT_CHECK_ARG(prepared_.has_value(), "process_weights_after_loading must run before the forward pass");
  return *prepared_;
}

void Fp8MoEMethod::create_weights(FusedMoE& layer, int64_t num_experts, int64_t hidden_size,
                                  int64_t intermediate_size_per_partition, DType params_dtype) {
  const int64_t e = num_experts, h = hidden_size, i = intermediate_size_per_partition;
  weight_only_ = use_weight_only(layer);
  layer.orig_dtype = params_dtype;
  layer.weight_block_size = std::nullopt;
  const bool serialized = config_->is_checkpoint_fp8_serialized;
  int64_t block_n = 0, block_k = 0;
  if (block_quant_) {
    layer.weight_block_size = config_->weight_block_size;
    block_n = (*config_->weight_block_size)[0];
    block_k = (*config_->weight_block_size)[1];
    // Gate and up are stacked (merged), so whole blocks per shard are needed at every TP size;
    // down is row-parallel only when split.
    FP8KIT_CHECK_ARG(i % block_n == 0,
                     "The output_size of gate's and up's weight = {} is not divisible by weight quantization block_n "
                     "= {}.",
                     i, block_n);
    FP8KIT_CHECK_ARG(layer.parallel().tp_size == 1 || i % block_k == 0,
                     "The input_size of down's weight = {} is not divisible by weight quantization block_k = {}.", i,
                     block_k);
  }
  const DType weight_dtype = serialized ? DType::kE4M3FN : params_dtype;
  const Device device = layer.device();
  layer.register_parameter(
      make_parameter("w13_weight", ParameterKind::kModelWeight, Tensor::empty({e, 2 * i, h}, weight_dtype, device)));
  layer.register_parameter(
      make_parameter("w2_weight", ParameterKind::kModelWeight, Tensor::empty({e, h, i}, weight_dtype, device)));
  // The scale kind is the spec's quant_method weight attribute ("tensor" / "block") that the
  // weight loader dispatches on. Ones, not a sentinel (hazard H5).
  if (block_quant_) {
    layer.register_parameter(make_parameter("w13_weight_scale_inv", ParameterKind::kBlockScale,
                                            ones_f32({e, 2 * ceil_div(i, block_n), ceil_div(h, block_k)}, device)));
    layer.register_parameter(make_parameter("w2_weight_scale_inv", ParameterKind::kBlockScale,
                                            ones_f32({e, ceil_div(h, block_n), ceil_div(i, block_k)}, device)));
  } else {
    layer.register_parameter(make_parameter("w13_weight_scale", ParameterKind::kPerTensorScale, ones_f32({e, 2}, device)));
    layer.register_parameter(make_parameter("w2_weight_scale", ParameterKind::kPerTensorScale, ones_f32({e}, device)));
  }
  if (config_->activation_scheme == "static") {
    FP8KIT_CHECK_ARG(serialized, "Found static activation scheme for checkpoint that was not serialized fp8.");
    layer.register_parameter(make_parameter("w13_input_scale", ParameterKind::kPerTensorScale, ones_f32({e}, device)));
    layer.register_parameter(make_parameter("w2_input_scale", ParameterKind::kPerTensorScale, ones_f32({e}, device)));
  }
}

Tensor Fp8MoEMethod::apply(const ForwardContext& ctx, FusedMoE& layer, const Tensor& x, const Tensor& router_logits,
                           const FusedMoEApplyOptions& options) {
  FP8KIT_CHECK_ARG(prepared_.has_value(), "{}: process_weights_after_loading must run before the forward pass",
                   layer.prefix());
  const PreparedFp8MoE& p = *prepared_;
  ops::FusedExpertsOptions o;
  o.activation = options.activation;
  o.apply_router_weight_on_input = options.apply_router_weight_on_input;
  o.global_num_experts = options.global_num_experts;
  o.expert_map = options.expert_map;
  o.w1_scale = p.w13_scale;
  o.w2_scale = p.w2_scale;
  o.block_shape = p.block;
  if (p.weight_only) {
    // The spec's fused_marlin_moe: 16-bit activations, a new output tensor.
    FP8KIT_CHECK_ARG(options.activation == "silu", "{} not supported for Marlin MoE.", options.activation);
    FP8KIT_CHECK_ARG(!options.apply_router_weight_on_input,
                     "apply_router_weight_on_input is not supported for Marlin MoE.");
    o.weight_only = true;
  } else {
    o.use_fp8_w8a8 = true;
    o.inplace = true;
    o.a1_scale = p.a13_scale;
    o.a2_scale = p.a2_scale;
  }
  const ops::TopkResult topk = FusedMoE::select_experts(ctx, x, router_logits, options);
  return ops::fused_experts(ctx, x, p.w13, p.w2, topk.weights, topk.ids, o);
}

}  // namespace fp8kit
