// FusedMoE (include/fp8kit/layers/fused_moe.h; spec 1.9): the constructor's invariants, the
// expert map, the choice of the quantization method, select_experts, forward and
// make_expert_params_mapping. The weight loader is in fused_moe_load.cpp. Tested by
// tests/cpu/test_fused_moe.cpp and tests/cpu/test_fused_moe_forward.cpp.
#include "fp8kit/layers/fused_moe.h"

#include "core/check.h"
#include "fp8kit/layers/fp8_moe_method.h"
#include "fp8kit/layers/quantization_config.h"
#include "fp8kit/layers/unquantized_fused_moe_method.h"

namespace fp8kit {
namespace {

const std::string& name_of(const std::string& prefix) {
  static const std::string kLayer = "FusedMoE";
  return prefix.empty() ? kLayer : prefix;
}

}  // namespace

FusedMoE::FusedMoE(std::string prefix, const FusedMoEOptions& options)
    : Layer(std::move(prefix), options.device), options_(options) {
  const std::string& name = name_of(this->prefix());
  const FusedMoEOptions& o = options_;
  FP8KIT_CHECK_ARG(o.num_experts >= 1 && o.top_k >= 1 && o.hidden_size >= 1 && o.intermediate_size >= 1,
                   "{}: num_experts, top_k, hidden_size and intermediate_size must be positive, got {}, {}, {} and {}",
                   name, o.num_experts, o.top_k, o.hidden_size, o.intermediate_size);
  FP8KIT_CHECK_ARG(o.num_redundant_experts >= 0, "{}: num_redundant_experts must not be negative, got {}", name,
                   o.num_redundant_experts);
  FP8KIT_CHECK_ARG(o.parallel.tp_size >= 1 && o.parallel.tp_rank >= 0 && o.parallel.tp_rank < o.parallel.tp_size,
                   "{}: tp_rank {} is not a rank of tp_size {}", name, o.parallel.tp_rank, o.parallel.tp_size);
  FP8KIT_CHECK_ARG(o.ep_size >= 1 && o.ep_rank >= 0 && o.ep_rank < o.ep_size, "{}: ep_rank {} is not a rank of ep_size {}",
                   name, o.ep_rank, o.ep_size);
  FP8KIT_CHECK_ARG(o.params_dtype == DType::kBF16 || o.params_dtype == DType::kF16 || o.params_dtype == DType::kF32,
                   "{}: params_dtype must be bf16, f16 or f32, got {}", name, dtype_name(o.params_dtype));

  global_num_experts_ = o.num_experts + o.num_redundant_experts;
  if (o.ep_size > 1) {
    auto [local, map] = ops::determine_expert_map(o.ep_size, o.ep_rank, global_num_experts_);
    local_num_experts_ = local;
    expert_map_ = map.to(device());
  } else {
    local_num_experts_ = global_num_experts_;
  }
  // The spec's `assert intermediate_size % self.tp_size == 0`, as an error that says what is wrong.
  FP8KIT_CHECK_ARG(o.intermediate_size % o.parallel.tp_size == 0,
                   "{}: intermediate_size {} is not divisible by tp_size {}", name, o.intermediate_size,
                   o.parallel.tp_size);
  hidden_size_ = o.hidden_size;
  intermediate_size_per_partition_ = o.intermediate_size / o.parallel.tp_size;
  if (o.use_grouped_topk) {
    FP8KIT_CHECK_ARG(o.num_expert_group.has_value() && o.topk_group.has_value(),
                     "{}: use_grouped_topk needs num_expert_group and topk_group", name);
  }
  if (o.scoring_func != "softmax" && !o.use_grouped_topk) {
    fail(ErrorCode::kInvalidArgument, "Only softmax scoring function is supported for non-grouped topk.");
  }
  e_score_correction_bias = o.e_score_correction_bias;
  orig_dtype = o.params_dtype;

  std::unique_ptr<QuantizeMethod> method;
  if (o.quant_config == nullptr) {
    method = std::make_unique<UnquantizedFusedMoEMethod>();
  } else {
    method = o.quant_config->get_quant_method(*this, this->prefix());
  }
  FP8KIT_CHECK(method != nullptr && dynamic_cast<FusedMoEMethodBase*>(method.get()) != nullptr, ErrorCode::kInternal,
               "{}: the quantization config gave {}, which is not a MoE method", name,
               method ? method->name() : std::string("no method"));
  if (o.enable_eplb) {
    FP8KIT_CHECK(dynamic_cast<Fp8MoEMethod*>(method.get()) != nullptr, ErrorCode::kUnsupported,
                 "EPLB is only supported for FP8 quantization for now.");
    FP8KIT_CHECK_ARG(global_num_experts_ % o.ep_size == 0,
                     "EPLB currently only supports even distribution of experts across ranks.");
  }
  set_quant_method(std::move(method));
  moe_method().create_weights(*this, local_num_experts_, hidden_size_, intermediate_size_per_partition_,
                              o.params_dtype);
}

FusedMoEMethodBase& FusedMoE::moe_method() const {
  FP8KIT_CHECK_ARG(quant_method() != nullptr, "{}: a bare FusedMoE has no method", name_of(prefix()));
  return static_cast<FusedMoEMethodBase&>(*quant_method());
}

std::string FusedMoE::loaded_shard_key(std::string_view shard_id, int64_t expert_id) {
  return std::string(shard_id) + " of expert " + std::to_string(expert_id);
}

std::vector<ExpertParamsMapping> FusedMoE::make_expert_params_mapping(const std::string& ckpt_gate_proj_name,
                                                                      const std::string& ckpt_down_proj_name,
                                                                      const std::string& ckpt_up_proj_name,
                                                                      int64_t num_experts,
                                                                      int64_t num_redundant_experts) {
  FP8KIT_CHECK_ARG(num_experts >= 1 && num_redundant_experts >= 0,
                   "make_expert_params_mapping: num_experts must be positive and num_redundant_experts not negative, "
                   "got {} and {}",
                   num_experts, num_redundant_experts);
  std::vector<ExpertParamsMapping> mapping;
  const std::pair<const char*, const std::string*> shards[] = {
      {"w1", &ckpt_gate_proj_name}, {"w2", &ckpt_down_proj_name}, {"w3", &ckpt_up_proj_name}};
  for (int64_t e = 0; e < num_experts + num_redundant_experts; ++e) {
    // EPLB's initial physical-to-logical map: the logical experts, then replicas round robin.
    const int64_t logical = e < num_experts ? e : (e - num_experts) % num_experts;
    for (const auto& [shard, name] : shards) {
      const bool w13 = *name == ckpt_gate_proj_name || *name == ckpt_up_proj_name;
      mapping.push_back({w13 ? "experts.w13_" : "experts.w2_", "experts." + std::to_string(logical) + "." + *name + ".",
                         e, shard});
    }
  }
  return mapping;
}

ops::TopkResult FusedMoE::select_experts(const ForwardContext& ctx, const Tensor& x, const Tensor& router_logits,
                                         const FusedMoEApplyOptions& o) {
  ops::SelectExpertsOptions s;
  s.top_k = o.top_k;
  s.renormalize = o.renormalize;
  s.use_grouped_topk = o.use_grouped_topk;
  s.topk_group = o.topk_group;
  s.num_expert_group = o.num_expert_group;
  s.custom_routing_function = o.custom_routing_function;
  s.scoring_func = o.scoring_func;
  s.e_score_correction_bias = o.e_score_correction_bias;
  s.enable_eplb = o.enable_eplb;
  s.expert_map = o.expert_map;
  s.expert_load_view = o.expert_load_view;
  s.logical_to_physical_map = o.logical_to_physical_map;
  s.logical_replica_count = o.logical_replica_count;
  return ops::select_experts(ctx, x, router_logits, s);
}

FusedMoEApplyOptions FusedMoE::apply_options() const {
  FusedMoEApplyOptions a;
  a.top_k = options_.top_k;
  a.renormalize = options_.renormalize;
  a.use_grouped_topk = options_.use_grouped_topk;
  a.topk_group = options_.topk_group;
  a.num_expert_group = options_.num_expert_group;
  a.global_num_experts = global_num_experts_;
  a.expert_map = expert_map_;
  a.custom_routing_function = options_.custom_routing_function;
  a.scoring_func = options_.scoring_func;
  a.e_score_correction_bias = e_score_correction_bias;
  a.apply_router_weight_on_input = options_.apply_router_weight_on_input;
  a.activation = options_.activation;
  a.enable_eplb = options_.enable_eplb;
  return a;
}

Tensor FusedMoE::forward(const ForwardContext& ctx, const Tensor& x, const Tensor& router_logits) {
  const std::string& name = name_of(prefix());
  FP8KIT_CHECK_ARG(x.defined() && x.dim() == 2 && x.size(1) == hidden_size_, "{}: the input must be [M, {}], got {}",
                   name, hidden_size_, x.defined() ? x.description() : std::string("an undefined tensor"));
  FP8KIT_CHECK_ARG(router_logits.defined() && router_logits.dim() == 2 && router_logits.size(0) == x.size(0) &&
                       router_logits.size(1) == options_.num_experts,
                   "{}: router_logits must be [{}, {}], got {}", name, x.size(0), options_.num_experts,
                   router_logits.defined() ? router_logits.description() : std::string("an undefined tensor"));
  FP8KIT_CHECK_ARG(x.device() == device(), "{}: the input is on {}, the layer on {}", name, x.device().str(),
                   device().str());
  return moe_method().apply(ctx, *this, x, router_logits, apply_options());
}

void FusedMoE::process_weights_after_loading(const ForwardContext& ctx) {
  moe_method().process_weights_after_loading(ctx, *this);
}

}  // namespace fp8kit
