// Public entry of fused_experts (include/fp8kit/ops/moe_experts.h): the checks of vLLM's
// fused_experts_impl with its texts, then fp8kit's own checks of the quantization arguments,
// the chunk size (options or the context's overrides), and routing by device. Tested by
// tests/cpu/test_fused_experts_errors.cpp and the other test_fused_experts*.cpp.
#include <string_view>
#include <tuple>

#include "core/checked_math.h"
#include "fp8kit/ops/moe_experts.h"
#include "ops/moe/fused_experts_cpu.h"  // CPU backend: fast pipeline or reference, by plan
#include "ops/moe/fused_experts_cuda.h"
#include "ops/moe/fused_experts_ref.h"
#include "ops/op_checks.h"

namespace fp8kit::ops {

using namespace detail;

namespace {

constexpr std::string_view kOp = "fused_experts";

GatedActivation parse_activation(const std::string& activation) {
  if (activation == "silu") return GatedActivation::kSilu;
  if (activation == "gelu") return GatedActivation::kGelu;
  fail(ErrorCode::kInvalidArgument, "Unsupported FusedMoe activation: {}", activation);
}

// Weight scales of w [E, n, k]: per-tensor (E elements) or block [E, ceil(n/bn), ceil(k/bk)].
void check_weight_scale(const Tensor& scale, std::string_view name, const Tensor& w, const FusedExpertsArgs& a) {
  require_defined(kOp, scale, name);
  require_same_device(kOp, scale, name, w, "w1");
  FP8KIT_CHECK_ARG(scale.dtype() == DType::kF32, "{}: `{}` must be f32, got {}", kOp, name, scale.description());
  const int64_t e = w.size(0), n = w.size(1), k = w.size(2);
  if (a.block) {
    const Shape want{e, ceil_div(n, a.block_n), ceil_div(k, a.block_k)};
    FP8KIT_CHECK_ARG(scale.shape() == want, "{}: `{}` must be [E, ceil({} / block_n), ceil({} / block_k)] = {}, got {}",
                     kOp, name, n, k, shape_to_string(want), scale.description());
  } else {
    FP8KIT_CHECK_ARG(scale.numel() == e && (scale.dim() == 1 || (scale.dim() == 2 && scale.size(1) == 1)),
                     "{}: `{}` must hold one scale per expert ([E] or [E, 1], E = {}), got {}", kOp, name, e,
                     scale.description());
  }
}

void check_quantization(const FusedExpertsOptions& o, FusedExpertsArgs& a) {
  FP8KIT_CHECK_ARG(!(o.use_fp8_w8a8 && o.weight_only), "{}: `use_fp8_w8a8` and `weight_only` exclude each other", kOp);
  a.quant = o.use_fp8_w8a8 ? ExpertQuant::kFp8W8A8 : o.weight_only ? ExpertQuant::kWeightOnly : ExpertQuant::kUnquantized;
  const DType t = a.hidden_states.dtype();
  if (a.quant == ExpertQuant::kUnquantized) {
    FP8KIT_CHECK_ARG(a.w1.dtype() == t && a.w2.dtype() == t,
                     "{}: unquantized experts need `w1` and `w2` of hidden_states' dtype {}, got {} and {}", kOp,
                     dtype_name(t), a.w1.description(), a.w2.description());
    FP8KIT_CHECK_ARG(!o.w1_scale.defined() && !o.w2_scale.defined() && !o.block_shape,
                     "{}: weight scales and `block_shape` need `use_fp8_w8a8` or `weight_only`", kOp);
  } else {
    if (a.quant == ExpertQuant::kFp8W8A8) {
      require_quant_dtype(kOp, a.w1.dtype(), "w1");
    } else {
      FP8KIT_CHECK_ARG(t == DType::kBF16 || t == DType::kF16,
                       "{}: weight-only experts need bf16 or f16 `hidden_states`, got {}", kOp,
                       a.hidden_states.description());
      FP8KIT_CHECK_ARG(a.w1.dtype() == DType::kE4M3FN, "{}: weight-only experts need e4m3fn `w1`, got {}", kOp,
                       a.w1.description());
    }
    FP8KIT_CHECK_ARG(a.w2.dtype() == a.w1.dtype(), "{}: `w1` and `w2` must have one FP8 dtype, got {} and {}", kOp,
                     a.w1.description(), a.w2.description());
    if (o.block_shape) {
      a.block = true;
      std::tie(a.block_n, a.block_k) = *o.block_shape;
      FP8KIT_CHECK_ARG(a.block_n > 0 && a.block_k > 0, "{}: block sizes must be positive, got [{}, {}]", kOp, a.block_n,
                       a.block_k);
    }
    check_weight_scale(o.w1_scale, "w1_scale", a.w1, a);
    check_weight_scale(o.w2_scale, "w2_scale", a.w2, a);
    a.w1_scale = o.w1_scale;
    a.w2_scale = o.w2_scale;
  }
  const bool static_scales_allowed = a.quant == ExpertQuant::kFp8W8A8 && !a.block;
  for (const auto& [scale, name] : {std::pair{&o.a1_scale, "a1_scale"}, std::pair{&o.a2_scale, "a2_scale"}}) {
    if (!scale->defined()) continue;
    // vLLM's block path ignores them silently; a scale that is dropped is a wrong result waiting.
    FP8KIT_CHECK_ARG(static_scales_allowed,
                     "{}: `{}` (a static activation scale) needs `use_fp8_w8a8` with per-tensor weight scales", kOp, name);
    require_f32_scalar(kOp, *scale, name);
    require_same_device(kOp, *scale, name, a.hidden_states, "hidden_states");
  }
  a.a1_scale = o.a1_scale;
  a.a2_scale = o.a2_scale;
  // per_token_group_quant's own text, raised before any chunk runs.
  if (a.quant == ExpertQuant::kFp8W8A8 && a.block) {
    for (const int64_t k : {a.hidden_size, a.intermediate_size}) {
      FP8KIT_CHECK_ARG(k % a.block_k == 0, "the last dimension of `x` {} must be divisible by `group_size` {}", k,
                       a.block_k);
    }
  }
}

void check_expert_map(const FusedExpertsOptions& o, FusedExpertsArgs& a) {
  a.global_num_experts = o.global_num_experts == -1 ? a.num_experts : o.global_num_experts;
  FP8KIT_CHECK_ARG(a.global_num_experts >= 1, "{}: `global_num_experts` must be -1 or positive, got {}", kOp,
                   o.global_num_experts);
  if (!o.expert_map.defined()) {
    FP8KIT_CHECK_ARG(a.global_num_experts == a.num_experts,
                     "{}: without `expert_map`, global_num_experts ({}) must equal the experts of w1 ({})", kOp,
                     a.global_num_experts, a.num_experts);
    return;
  }
  require_same_device(kOp, o.expert_map, "expert_map", a.hidden_states, "hidden_states");
  FP8KIT_CHECK_ARG(o.expert_map.dtype() == DType::kI32 && o.expert_map.dim() == 1 &&
                       o.expert_map.size(0) == a.global_num_experts,
                   "{}: `expert_map` must be i32 [global_num_experts] = [{}], got {}", kOp, a.global_num_experts,
                   o.expert_map.description());
  a.expert_map = o.expert_map;
}

}  // namespace

Tensor fused_experts(const ForwardContext& ctx, const Tensor& hidden_states, const Tensor& w1, const Tensor& w2, const Tensor& topk_weights,
                     const Tensor& topk_ids, const FusedExpertsOptions& options) {
  require_defined(kOp, hidden_states, "hidden_states");
  require_defined(kOp, w1, "w1");
  require_defined(kOp, w2, "w2");
  require_defined(kOp, topk_weights, "topk_weights");
  require_defined(kOp, topk_ids, "topk_ids");
  for (const auto& [t, name] : {std::pair{&w1, "w1"}, std::pair{&w2, "w2"}, std::pair{&topk_weights, "topk_weights"},
                                std::pair{&topk_ids, "topk_ids"}}) {
    require_same_device(kOp, *t, name, hidden_states, "hidden_states");
  }
  require_backend(kOp, hidden_states.device());
  require_dim(kOp, hidden_states, "hidden_states", 2);
  require_dim(kOp, w1, "w1", 3);
  require_dim(kOp, w2, "w2", 3);
  // vLLM's fused_experts_impl checks, in its order and with its texts.
  FP8KIT_CHECK_ARG(hidden_states.size(1) == w1.size(2), "Hidden size mismatch {} != {}", hidden_states.size(1),
                   w1.size(2));
  FP8KIT_CHECK_ARG(topk_weights.shape() == topk_ids.shape(), "topk shape mismatch");
  FP8KIT_CHECK_ARG(hidden_states.is_contiguous(), "Hidden_states must be contiguous");
  FP8KIT_CHECK_ARG(w1.stride(-1) == 1 && w2.stride(-1) == 1, "Stride of last dimension must be 1");
  require_float_input(kOp, hidden_states, "hidden_states");

  FusedExpertsArgs a;
  a.hidden_states = hidden_states;
  a.w1 = w1;
  a.w2 = w2;
  a.num_tokens = hidden_states.size(0);
  a.hidden_size = hidden_states.size(1);
  a.num_experts = w1.size(0);
  FP8KIT_CHECK_ARG(w1.size(1) % 2 == 0, "{}: `w1` must be [E, 2I, H] (gate and up stacked), got {}", kOp,
                   w1.description());
  a.intermediate_size = w1.size(1) / 2;
  const Shape w2_want{a.num_experts, a.hidden_size, a.intermediate_size};
  FP8KIT_CHECK_ARG(w2.shape() == w2_want, "{}: `w2` must be [E, H, I] = {}, got {}", kOp, shape_to_string(w2_want),
                   w2.description());
  require_dim(kOp, topk_ids, "topk_ids", 2);
  FP8KIT_CHECK_ARG(topk_ids.size(0) == a.num_tokens, "{}: `topk_ids` must have one row per token ({}), got {}", kOp,
                   a.num_tokens, topk_ids.description());
  FP8KIT_CHECK_ARG(topk_weights.dtype() == DType::kF32, "{}: `topk_weights` must be f32, got {}", kOp,
                   topk_weights.description());
  FP8KIT_CHECK_ARG(topk_ids.dtype() == DType::kI32 || topk_ids.dtype() == DType::kI64,
                   "{}: `topk_ids` must be i32 or i64, got {}", kOp, topk_ids.description());
  a.topk_weights = topk_weights;
  a.topk_ids = topk_ids;
  a.top_k = topk_ids.size(1);
  a.activation = parse_activation(options.activation);
  a.apply_router_weight_on_input = options.apply_router_weight_on_input;
  check_quantization(options, a);
  check_expert_map(options, a);
  FP8KIT_CHECK_ARG(options.chunk_size >= 0, "{}: `chunk_size` must be 0 (the default) or positive, got {}", kOp,
                   options.chunk_size);
  a.chunk_size = options.chunk_size > 0 ? options.chunk_size : ctx.overrides().fused_moe_chunk_size;
  a.fast_accum = options.fast_accum || ctx.overrides().moe_fast_accum;
  a.ctx = &ctx;

  a.out = options.inplace ? hidden_states : Tensor::empty(hidden_states.shape(), hidden_states.dtype(),
                                                         hidden_states.device());
  if (a.num_tokens == 0 || a.hidden_size == 0) return a.out;
  if (a.top_k == 0 || a.intermediate_size == 0) {  // no expert contributes: the sum is zero
    a.out.fill_bytes_(0, ctx.stream());
    return a.out;
  }
  route(kOp, ctx, hidden_states.device(), a, fused_experts_cpu, fused_experts_cuda);
  return a.out;
}

}  // namespace fp8kit::ops
