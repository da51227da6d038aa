// The ops as the Python package calls them (python/fp8kit/ops.py gives them vLLM's names and
// signatures and converts the arrays): each takes fp8kit Tensors, runs without the GIL on the
// context of its first tensor's device and the caller's stream, and returns Tensors.
// Reference: include/fp8kit/ops/*.h; tests: tests/python/bindings/test_bindings_ops.py.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "fp8kit/error.h"
#include "fp8kit/ops/gemm.h"
#include "fp8kit/ops/kv_cache.h"
#include "fp8kit/ops/moe_experts.h"
#include "fp8kit/ops/moe_routing.h"
#include "fp8kit/ops/norm.h"
#include "fp8kit/ops/quant.h"
#include "op_context.h"

namespace nb = nanobind;

namespace fp8kit::python {

namespace {

using OptTensor = std::optional<Tensor>;
using Block = std::optional<std::pair<int64_t, int64_t>>;

Tensor or_undefined(const OptTensor& t) { return t ? *t : Tensor(); }

DType parse_dtype(const std::string& name, const char* argument) {
  if (const std::optional<DType> d = dtype_from_name(name)) return *d;
  throw Error(ErrorCode::kInvalidArgument, "`" + std::string(argument) + "`: unknown dtype '" + name + "'");
}

std::pair<Tensor, Tensor> scaled_fp8_quant(const Tensor& input, const OptTensor& scale,
                                           std::optional<int64_t> num_token_padding, const OptTensor& scale_ub,
                                           bool use_per_token_if_dynamic, const OptTensor& output,
                                           const std::string& out_dtype, uintptr_t stream) {
  ops::ScaledFp8QuantOptions o;
  o.scale = or_undefined(scale);
  o.num_token_padding = num_token_padding;
  o.scale_ub = or_undefined(scale_ub);
  o.use_per_token_if_dynamic = use_per_token_if_dynamic;
  o.output = or_undefined(output);
  o.out_dtype = parse_dtype(out_dtype, "dtype");
  ops::QuantResult r = run_op(input.device(), stream, [&](const ForwardContext& ctx) {
    return ops::scaled_fp8_quant(ctx, input, o);
  });
  return {r.q, r.scale};
}

std::pair<Tensor, Tensor> per_token_group_quant(const Tensor& x, int64_t group_size, float eps,
                                                const std::string& out_dtype, bool column_major_scales,
                                                bool tma_aligned_scales, bool use_ue8m0, const OptTensor& out_q,
                                                uintptr_t stream) {
  ops::PerTokenGroupQuantOptions o;
  o.group_size = group_size;
  o.eps = eps;
  o.out_dtype = parse_dtype(out_dtype, "dtype");
  o.column_major_scales = column_major_scales;
  o.tma_aligned_scales = tma_aligned_scales;
  o.use_ue8m0 = use_ue8m0;
  o.output = or_undefined(out_q);
  ops::QuantResult r = run_op(x.device(), stream, [&](const ForwardContext& ctx) {
    return ops::per_token_group_quant(ctx, x, o);
  });
  return {r.q, r.scale};
}

Tensor scaled_mm(const Tensor& a, const Tensor& b, const Tensor& scale_a, const Tensor& scale_b,
                 const std::string& out_dtype, const OptTensor& bias, Block block, const OptTensor& out, bool fast_accum,
                 uintptr_t stream) {
  ops::ScaledMmOptions o;
  o.bias = or_undefined(bias);
  o.out_dtype = parse_dtype(out_dtype, "out_dtype");
  o.block = block;
  o.output = or_undefined(out);
  o.fast_accum = fast_accum;
  return run_op(a.device(), stream, [&](const ForwardContext& ctx) {
    return ops::scaled_mm(ctx, a, b, scale_a, scale_b, o);
  });
}

Tensor fused_experts(const Tensor& hidden_states, const Tensor& w1, const Tensor& w2, const Tensor& topk_weights,
                     const Tensor& topk_ids, bool inplace, const std::string& activation,
                     bool apply_router_weight_on_input, bool use_fp8_w8a8, bool weight_only, int64_t global_num_experts,
                     const OptTensor& expert_map, const OptTensor& w1_scale, const OptTensor& w2_scale,
                     const OptTensor& a1_scale, const OptTensor& a2_scale, Block block_shape, int64_t chunk_size,
                     bool fast_accum, uintptr_t stream) {
  ops::FusedExpertsOptions o;
  o.inplace = inplace;
  o.activation = activation;
  o.apply_router_weight_on_input = apply_router_weight_on_input;
  o.use_fp8_w8a8 = use_fp8_w8a8;
  o.weight_only = weight_only;
  o.global_num_experts = global_num_experts;
  o.expert_map = or_undefined(expert_map);
  o.w1_scale = or_undefined(w1_scale);
  o.w2_scale = or_undefined(w2_scale);
  o.a1_scale = or_undefined(a1_scale);
  o.a2_scale = or_undefined(a2_scale);
  o.block_shape = block_shape;
  o.chunk_size = chunk_size;
  o.fast_accum = fast_accum;
  return run_op(hidden_states.device(), stream, [&](const ForwardContext& ctx) {
    return ops::fused_experts(ctx, hidden_states, w1, w2, topk_weights, topk_ids, o);
  });
}

std::pair<Tensor, Tensor> fused_topk(const Tensor& hidden_states, const Tensor& gating_output, int64_t topk,
                                     bool renormalize, const std::optional<std::string>& indices_type,
                                     uintptr_t stream) {
  std::optional<DType> indices;
  if (indices_type) indices = parse_dtype(*indices_type, "indices_type");
  ops::TopkResult r = run_op(gating_output.device(), stream, [&](const ForwardContext& ctx) {
    return ops::fused_topk(ctx, hidden_states, gating_output, topk, renormalize, indices);
  });
  return {r.weights, r.ids};
}

std::tuple<Tensor, Tensor, Tensor> moe_align_block_size(const Tensor& topk_ids, int64_t block_size,
                                                        int64_t num_experts, const OptTensor& expert_map,
                                                        bool pad_sorted_ids, uintptr_t stream) {
  ops::MoeAlignResult r = run_op(topk_ids.device(), stream, [&](const ForwardContext& ctx) {
    return ops::moe_align_block_size(ctx, topk_ids, block_size, num_experts, or_undefined(expert_map), pad_sorted_ids);
  });
  return {r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded};
}

Tensor gated_activation(const std::string& activation, const Tensor& x, const OptTensor& out, uintptr_t stream) {
  return run_op(x.device(), stream, [&](const ForwardContext& ctx) {
    if (activation == "silu") return ops::silu_and_mul(ctx, x, or_undefined(out));
    if (activation == "gelu") return ops::gelu_and_mul(ctx, x, or_undefined(out));
    throw Error(ErrorCode::kInvalidArgument, "unknown gated activation '" + activation + "'");
  });
}

void moe_sum(const Tensor& input, Tensor output, uintptr_t stream) {
  run_op(input.device(), stream, [&](const ForwardContext& ctx) { ops::moe_sum(ctx, input, output); });
}

void reshape_and_cache_flash(const Tensor& key, const Tensor& value, const Tensor& key_cache, const Tensor& value_cache,
                             const Tensor& slot_mapping, const std::string& kv_cache_dtype, const OptTensor& k_scale,
                             const OptTensor& v_scale, uintptr_t stream) {
  const ops::KvCacheDtype dtype = ops::parse_kv_cache_dtype(kv_cache_dtype);
  run_op(key.device(), stream, [&](const ForwardContext& ctx) {
    ops::reshape_and_cache_flash(ctx, key, value, key_cache, value_cache, slot_mapping, dtype, or_undefined(k_scale),
                                 or_undefined(v_scale));
  });
}

Tensor rms_norm(const Tensor& input, const Tensor& weight, float epsilon, const OptTensor& out, uintptr_t stream) {
  return run_op(input.device(), stream, [&](const ForwardContext& ctx) {
    return ops::rms_norm(ctx, input, weight, epsilon, or_undefined(out));
  });
}

void fused_add_rms_norm(const Tensor& input, const Tensor& residual, const Tensor& weight, float epsilon,
                        uintptr_t stream) {
  run_op(input.device(), stream, [&](const ForwardContext& ctx) {
    ops::fused_add_rms_norm(ctx, input, residual, weight, epsilon);
  });
}

}  // namespace

void bind_ops(nb::module_& m) {
  using nb::arg;
  m.def("scaled_fp8_quant", &scaled_fp8_quant, arg("input"), arg("scale").none(), arg("num_token_padding").none(),
        arg("scale_ub").none(), arg("use_per_token_if_dynamic"), arg("output").none(), arg("dtype"), arg("stream"));
  m.def("per_token_group_quant", &per_token_group_quant, arg("x"), arg("group_size"), arg("eps"), arg("dtype"),
        arg("column_major_scales"), arg("tma_aligned_scales"), arg("use_ue8m0"), arg("out_q").none(), arg("stream"));
  m.def("scaled_mm", &scaled_mm, arg("a"), arg("b"), arg("scale_a"), arg("scale_b"), arg("out_dtype"),
        arg("bias").none(), arg("block").none(), arg("out").none(), arg("fast_accum"), arg("stream"));
  m.def("fused_experts", &fused_experts, arg("hidden_states"), arg("w1"), arg("w2"), arg("topk_weights"),
        arg("topk_ids"), arg("inplace"), arg("activation"), arg("apply_router_weight_on_input"), arg("use_fp8_w8a8"),
        arg("weight_only"), arg("global_num_experts"), arg("expert_map").none(), arg("w1_scale").none(),
        arg("w2_scale").none(), arg("a1_scale").none(), arg("a2_scale").none(), arg("block_shape").none(),
        arg("chunk_size"), arg("fast_accum"), arg("stream"));
  m.def("fused_topk", &fused_topk, arg("hidden_states"), arg("gating_output"), arg("topk"), arg("renormalize"),
        arg("indices_type").none(), arg("stream"));
  m.def("moe_align_block_size", &moe_align_block_size, arg("topk_ids"), arg("block_size"), arg("num_experts"),
        arg("expert_map").none(), arg("pad_sorted_ids"), arg("stream"));
  m.def("gated_activation", &gated_activation, arg("activation"), arg("x"), arg("out").none(), arg("stream"));
  m.def("moe_sum", &moe_sum, arg("input"), arg("output"), arg("stream"));
  m.def("reshape_and_cache_flash", &reshape_and_cache_flash, arg("key"), arg("value"), arg("key_cache"),
        arg("value_cache"), arg("slot_mapping"), arg("kv_cache_dtype"), arg("k_scale").none(), arg("v_scale").none(),
        arg("stream"));
  m.def("rms_norm", &rms_norm, arg("input"), arg("weight"), arg("epsilon"), arg("out").none(), arg("stream"));
  m.def("fused_add_rms_norm", &fused_add_rms_norm, arg("input"), arg("residual"), arg("weight"), arg("epsilon"),
        arg("stream"));
}

}  // namespace fp8kit::python
