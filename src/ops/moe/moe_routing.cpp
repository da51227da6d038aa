// Public entry points of the MoE routing ops (include/fp8kit/ops/moe_routing.h): fused_topk,
// grouped_topk and select_experts. Each validates its arguments once (spec error texts verbatim),
// allocates the outputs, fills the args structs of routing_args.h and routes by device to
// routing_ref.cpp or routing_cuda.cu. Tested by tests/cpu/test_moe_routing.cpp.
#include "fp8kit/ops/moe_routing.h"

#include "ops/moe/routing_cuda.h"
#include "ops/moe/routing_ref.h"
#include "ops/op_checks.h"

namespace fp8kit::ops {

using namespace detail;

namespace {

void require_index_dtype(std::string_view op, DType dtype, std::string_view name) {
  FP8KIT_CHECK_ARG(dtype == DType::kI32 || dtype == DType::kI64, "{}: `{}` must be i32 or i64, got {}", op, name,
                   dtype_name(dtype));
}

// What fused_topk and grouped_topk share: the checks of hidden_states, gating_output and topk,
// the outputs, and the part of the args they fill. `gating` is made row-contiguous.
struct TopkCall {
  TopkArgs args;
  TopkResult result;
  Tensor gating;  // keeps a contiguous copy alive
};

TopkCall prepare_topk(std::string_view op, const Tensor& hidden_states, const Tensor& gating_output, int64_t topk,
                      bool renormalize, DType indices_type, Stream stream) {
  require_defined(op, hidden_states, "hidden_states");
  require_defined(op, gating_output, "gating_output");
  require_same_device(op, gating_output, "gating_output", hidden_states, "hidden_states");
  require_backend(op, gating_output.device());
  FP8KIT_CHECK_ARG(hidden_states.dim() >= 1, "{}: `hidden_states` must have a token dimension, got {}", op,
                   hidden_states.description());
  require_dim(op, gating_output, "gating_output", 2);
  require_float_input(op, gating_output, "gating_output");
  FP8KIT_CHECK_ARG(hidden_states.size(0) == gating_output.size(0), "Number of tokens mismatch");
  const int64_t m = gating_output.size(0), e = gating_output.size(1);
  FP8KIT_CHECK_ARG(e >= 1, "{}: `gating_output` has no experts: {}", op, gating_output.description());
  FP8KIT_CHECK_ARG(topk >= 1 && topk <= e, "{}: `topk` must be in [1, {}] (the number of experts), got {}", op, e,
                   topk);
  require_index_dtype(op, indices_type, "indices_type");

  TopkCall call;
  call.gating = gating_output.stride(1) == 1 || e == 1 ? gating_output : contiguous_on(gating_output, stream);
  const Device device = gating_output.device();
  call.result.weights = Tensor::empty({m, topk}, DType::kF32, device);
  call.result.ids = Tensor::empty({m, topk}, indices_type, device);
  TopkArgs& a = call.args;
  a.gating = call.gating.data_ptr();
  a.gating_dtype = call.gating.dtype();
  a.gating_row_stride = call.gating.stride(0);
  a.m = m;
  a.num_experts = e;
  a.topk = topk;
  a.renormalize = renormalize;
  a.weights = static_cast<float*>(call.result.weights.data_ptr());
  a.ids = call.result.ids.data_ptr();
  a.ids_dtype = indices_type;
  return call;
}

// The dtype torch gives `a + b` for two float tensors of these dtypes.
DType promote_float(DType a, DType b) { return a == b ? a : DType::kF32; }

void check_routing_result(const TopkResult& r, const Tensor& logits, int64_t top_k) {
  constexpr std::string_view kOp = "select_experts";
  const Shape want{logits.size(0), top_k};
  FP8KIT_CHECK_ARG(r.weights.defined() && r.weights.dtype() == DType::kF32 && r.weights.shape() == want &&
                       r.weights.device() == logits.device(),
                   "{}: `custom_routing_function` must return f32 weights of shape {} on {}, got {}", kOp,
                   shape_to_string(want), logits.device().str(),
                   r.weights.defined() ? r.weights.description() : "an undefined tensor");
  FP8KIT_CHECK_ARG(r.ids.defined() && (r.ids.dtype() == DType::kI32 || r.ids.dtype() == DType::kI64) &&
                       r.ids.shape() == want && r.ids.device() == logits.device(),
                   "{}: `custom_routing_function` must return i32 or i64 ids of shape {} on {}, got {}", kOp,
                   shape_to_string(want), logits.device().str(),
                   r.ids.defined() ? r.ids.description() : "an undefined tensor");
}

void check_eplb(const SelectExpertsOptions& o, const Tensor& logits) {
  constexpr std::string_view kOp = "select_experts";
  const std::pair<const Tensor*, std::string_view> required[] = {{&o.expert_load_view, "expert_load_view"},
                                                                  {&o.logical_to_physical_map, "logical_to_physical_map"},
                                                                  {&o.logical_replica_count, "logical_replica_count"}};
  for (const auto& [t, name] : required) {
    FP8KIT_CHECK_ARG(t->defined(), "{}: enable_eplb requires `{}`", kOp, name);
    require_same_device(kOp, *t, name, logits, "router_logits");
  }
  require_same_device(kOp, o.expert_map, "expert_map", logits, "router_logits");
  require_dim(kOp, o.expert_load_view, "expert_load_view", 1);
  FP8KIT_CHECK_ARG(o.expert_load_view.dtype() == DType::kI64 && o.expert_load_view.is_contiguous(),
                   "{}: `expert_load_view` must be a contiguous i64 tensor, got {}", kOp,
                   o.expert_load_view.description());
  require_dim(kOp, o.logical_to_physical_map, "logical_to_physical_map", 2);
  require_index_dtype(kOp, o.logical_to_physical_map.dtype(), "logical_to_physical_map");
  FP8KIT_CHECK_ARG(o.logical_to_physical_map.size(1) >= 1, "{}: `logical_to_physical_map` has no replica column: {}",
                   kOp, o.logical_to_physical_map.description());
  require_dim(kOp, o.logical_replica_count, "logical_replica_count", 1);
  require_index_dtype(kOp, o.logical_replica_count.dtype(), "logical_replica_count");
  FP8KIT_CHECK_ARG(o.logical_replica_count.size(0) == o.logical_to_physical_map.size(0),
                   "{}: `logical_replica_count` has {} entries but `logical_to_physical_map` has {} rows", kOp,
                   o.logical_replica_count.size(0), o.logical_to_physical_map.size(0));
  if (o.expert_map.defined()) {
    require_dim(kOp, o.expert_map, "expert_map", 1);
    FP8KIT_CHECK_ARG(o.expert_map.dtype() == DType::kI32, "{}: `expert_map` must be i32, got {}", kOp,
                     o.expert_map.description());
  }
}

// Logical ids -> physical replicas, counting the load of this rank's experts (spec 1.9 EPLB).
Tensor apply_eplb(const ForwardContext& ctx, const SelectExpertsOptions& o, const Tensor& ids_in, DType out_dtype) {
  constexpr std::string_view kOp = "select_experts";
  const Stream stream = ctx.stream();
  const Tensor ids = contiguous_on(ids_in, stream);
  const Tensor l2p = contiguous_on(o.logical_to_physical_map, stream);
  const Tensor count = contiguous_on(o.logical_replica_count, stream);
  const Tensor map = o.expert_map.defined() ? contiguous_on(o.expert_map, stream) : Tensor();
  Tensor out = Tensor::empty(ids.shape(), out_dtype, ids.device());
  EplbArgs a;
  a.ids_in = ids.data_ptr();
  a.ids_in_dtype = ids.dtype();
  a.numel = ids.numel();
  a.ids_out = out.data_ptr();
  a.ids_out_dtype = out_dtype;
  a.logical_to_physical = l2p.data_ptr();
  a.logical_to_physical_dtype = l2p.dtype();
  a.num_logical = l2p.size(0);
  a.max_replicas = l2p.size(1);
  a.replica_count = count.data_ptr();
  a.replica_count_dtype = count.dtype();
  a.expert_map = map.defined() ? static_cast<const int32_t*>(map.data_ptr()) : nullptr;
  a.num_physical = map.defined() ? map.size(0) : 0;
  a.expert_load = static_cast<int64_t*>(o.expert_load_view.data_ptr());
  a.load_size = o.expert_load_view.size(0);
  route(kOp, ctx, ids.device(), a, eplb_ref, eplb_cuda);
  return out;
}

}  // namespace

TopkResult fused_topk(const ForwardContext& ctx, const Tensor& hidden_states, const Tensor& gating_output, int64_t topk,
                      bool renormalize, std::optional<DType> indices_type) {
  constexpr std::string_view kOp = "fused_topk";
  const Stream stream = ctx.stream();
  TopkCall call =
      prepare_topk(kOp, hidden_states, gating_output, topk, renormalize, indices_type.value_or(DType::kI32), stream);
  // gating_output.float(), then softmax and top-k in f32 (spec 1.9).
  call.args.scoring = ScoringFunc::kSoftmax;
  call.args.score_dtype = DType::kF32;
  route(kOp, ctx, call.gating.device(), call.args, topk_ref, topk_cuda);
  return call.result;
}

namespace {

// grouped_topk with its ids written directly in `ids_dtype` (select_experts' topk_ids.to(indices_type)).
TopkResult grouped_topk_as(const ForwardContext& ctx, const Tensor& hidden_states, const Tensor& gating_output,
                           int64_t topk, bool renormalize, const GroupedTopkOptions& options, DType ids_dtype) {
  constexpr std::string_view kOp = "grouped_topk";
  const Stream stream = ctx.stream();
  TopkCall call = prepare_topk(kOp, hidden_states, gating_output, topk, renormalize, ids_dtype, stream);
  TopkArgs& a = call.args;
  if (options.scoring_func == "softmax") {
    a.scoring = ScoringFunc::kSoftmax;
  } else if (options.scoring_func == "sigmoid") {
    a.scoring = ScoringFunc::kSigmoid;
  } else {
    fail(ErrorCode::kInvalidArgument, "Unsupported scoring function: {}", options.scoring_func);
  }
  const int64_t e = a.num_experts, groups = options.num_expert_group;
  FP8KIT_CHECK_ARG(groups >= 1, "{}: `num_expert_group` must be positive, got {}", kOp, groups);
  FP8KIT_CHECK_ARG(e % groups == 0, "{}: the number of experts {} is not divisible by `num_expert_group` {}", kOp, e,
                   groups);
  FP8KIT_CHECK_ARG(options.topk_group >= 1 && options.topk_group <= groups,
                   "{}: `topk_group` must be in [1, {}] (`num_expert_group`), got {}", kOp, groups, options.topk_group);
  const int64_t eligible = options.topk_group * (e / groups);
  FP8KIT_CHECK_ARG(topk <= eligible,
                   "{}: `topk` {} exceeds the {} experts of the `topk_group` = {} groups that stay eligible", kOp, topk,
                   eligible, options.topk_group);
  // Scores in the dtype of gating_output (spec 1.9, 2.9 H7): each torch op computes in f32 and
  // rounds its result to that dtype; see routing_args.h for the exact steps.
  a.score_dtype = gating_output.dtype();
  a.num_expert_group = groups;
  a.topk_group = options.topk_group;
  Tensor bias;
  if (options.e_score_correction_bias.defined()) {
    const Tensor& b = options.e_score_correction_bias;
    require_same_device(kOp, b, "e_score_correction_bias", gating_output, "gating_output");
    require_float_input(kOp, b, "e_score_correction_bias");
    FP8KIT_CHECK_ARG(b.dim() == 1 && b.size(0) == e, "{}: `e_score_correction_bias` must have shape [{}], got {}", kOp,
                     e, b.description());
    FP8KIT_CHECK_ARG(e / groups >= 2,
                     "{}: `e_score_correction_bias` scores a group by its two best experts; groups of {} expert "
                     "cannot be scored",
                     kOp, e / groups);
    bias = contiguous_on(b, stream);
    a.bias = bias.data_ptr();
    a.bias_dtype = bias.dtype();
    a.key_dtype = promote_float(a.score_dtype, bias.dtype());
  }
  route(kOp, ctx, call.gating.device(), a, topk_ref, topk_cuda);
  return call.result;
}

}  // namespace

TopkResult grouped_topk(const ForwardContext& ctx, const Tensor& hidden_states, const Tensor& gating_output, int64_t topk,
                        bool renormalize, const GroupedTopkOptions& options) {
  return grouped_topk_as(ctx, hidden_states, gating_output, topk, renormalize, options, DType::kI32);
}

TopkResult select_experts(const ForwardContext& ctx, const Tensor& hidden_states, const Tensor& router_logits,
                          const SelectExpertsOptions& o) {
  constexpr std::string_view kOp = "select_experts";
  require_defined(kOp, router_logits, "router_logits");
  if (o.use_grouped_topk) {
    FP8KIT_CHECK_ARG(o.topk_group.has_value() && o.num_expert_group.has_value(),
                     "{}: use_grouped_topk requires `topk_group` and `num_expert_group`", kOp);
  } else {
    // FusedMoE's constructor check (spec 1.9): the plain path would otherwise ignore scoring_func.
    FP8KIT_CHECK_ARG(o.scoring_func == "softmax", "Only softmax scoring function is supported for non-grouped topk.");
  }
  if (o.indices_type) require_index_dtype(kOp, *o.indices_type, "indices_type");
  if (o.enable_eplb) check_eplb(o, router_logits);

  TopkResult r;
  if (o.use_grouped_topk) {
    GroupedTopkOptions g;
    g.num_expert_group = *o.num_expert_group;
    g.topk_group = *o.topk_group;
    g.scoring_func = o.scoring_func;
    g.e_score_correction_bias = o.e_score_correction_bias;
    const DType ids_dtype = o.enable_eplb ? DType::kI32 : o.indices_type.value_or(DType::kI32);
    r = grouped_topk_as(ctx, hidden_states, router_logits, o.top_k, o.renormalize, g, ids_dtype);
  } else if (!o.custom_routing_function) {
    r = fused_topk(ctx, hidden_states, router_logits, o.top_k, o.renormalize, o.indices_type);
  } else {
    r = o.custom_routing_function(hidden_states, router_logits, o.top_k, o.renormalize);
    check_routing_result(r, router_logits, o.top_k);
  }
  // Like the spec, a custom function's ids keep their dtype unless EPLB rewrites them.
  if (o.enable_eplb) r.ids = apply_eplb(ctx, o, r.ids, o.indices_type.value_or(r.ids.dtype()));
  return r;
}

}  // namespace fp8kit::ops
