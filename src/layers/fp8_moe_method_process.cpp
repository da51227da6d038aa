// Fp8MoEMethod::process_weights_after_loading (spec 1.8): block (kept), online (per-expert dynamic
// quantization), serialized per-tensor (input scales to their max, w13 requantized per expert to
// the max of its two shard scales), then weight-only. Tested by
// tests/cpu/test_fp8_moe_method_process.cpp.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <tuple>
#include <vector>

#include "core/check.h"
#include "fp8kit/layers/fp8_config.h"
#include "fp8kit/layers/fp8_moe_method.h"
#include "fp8kit/layers/fused_moe.h"
#include "fp8kit/log.h"
#include "fp8kit/ops/quant.h"
#include "layers/fp8_linear_method_internal.h"

namespace fp8kit {

namespace detail {
namespace {
std::atomic<bool> moe_input_scale_warned{false};
}  // namespace

void reset_moe_input_scale_warning() { moe_input_scale_warned = false; }

}  // namespace detail

namespace {

using detail::host_values;
using detail::scalar_on;

// torch.max: NaN wins.
float max_of(const float* v, size_t n) {
  float m = v[0];
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(v[i]) || std::isnan(m)) return NAN;
    m = std::max(m, v[i]);
  }
  return m;
}

// all_close_1d: torch.allclose(x[0], x[i]) for every i (rtol 1e-5, atol 1e-8; NaN never close).
bool all_close_1d(const std::vector<float>& x) {
  for (float v : x) {
    if (!(std::fabs(double(x[0]) - double(v)) <= 1e-8 + 1e-5 * std::fabs(double(v)))) return false;
  }
  return true;
}

}  // namespace

void Fp8MoEMethod::process_online(const ForwardContext& ctx, FusedMoE& layer) {
  // One dynamic per-tensor scale per expert over the merged w13 (the [E, 2] scale parameter is
  // re-created as [E]) and one per expert for w2; no floor on the scale.
  const int64_t experts = layer.local_num_experts();
  const Device device = layer.device();
  Parameter& w13 = layer.parameter("w13_weight");
  Parameter& w2 = layer.parameter("w2_weight");
  Tensor w13_q = Tensor::empty(w13.data.shape(), DType::kE4M3FN, device);
  Tensor w2_q = Tensor::empty(w2.data.shape(), DType::kE4M3FN, device);
  std::vector<float> w13_scale(static_cast<size_t>(experts), 1.0f), w2_scale(static_cast<size_t>(experts), 1.0f);
  for (int64_t e = 0; e < experts; ++e) {
    for (auto [src, dst, scale] : {std::tuple{&w13.data, &w13_q, &w13_scale}, std::tuple{&w2.data, &w2_q, &w2_scale}}) {
      ops::ScaledFp8QuantOptions o;
      o.output = dst->select(0, e);
      (*scale)[size_t(e)] = ops::scaled_fp8_quant(ctx, src->select(0, e), o).scale.to(Device::cpu()).item_f32();
    }
  }
  w13.data = w13_q;
  w2.data = w2_q;
  layer.parameter("w13_weight_scale").data = Tensor::from_vector(w13_scale).to(device);
  layer.parameter("w2_weight_scale").data = Tensor::from_vector(w2_scale).to(device);
}

void Fp8MoEMethod::process_serialized_per_tensor(const ForwardContext& ctx, FusedMoE& layer) {
  const Device device = layer.device();
  if (config_->activation_scheme == "static") {
    Parameter* w13_input = layer.find_parameter("w13_input_scale");
    Parameter* w2_input = layer.find_parameter("w2_input_scale");
    FP8KIT_CHECK_ARG(w13_input != nullptr && w2_input != nullptr,
                     "QuantConfig has static quantization, but found activation scales are None.");
    const std::vector<float> a13 = host_values(w13_input->data), a2 = host_values(w2_input->data);
    if ((!all_close_1d(a13) || !all_close_1d(a2)) && !detail::moe_input_scale_warned.exchange(true)) {
      log_warning(
          "Found input_scales that are not equal for fp8 MoE layer. Using the maximum across experts for each layer.");
    }
    w13_input->data = scalar_on(max_of(a13.data(), a13.size()), device);  // 0-dim
    w2_input->data = scalar_on(max_of(a2.data(), a2.size()), device);
  }
  // The fused kernels take one w13 scale per expert: each shard is dequantized with its own
  // scale (to f16, as per_tensor_dequantize does) and quantized again with the larger one.
  Parameter& w13 = layer.parameter("w13_weight");
  Parameter& w13_scale = layer.parameter("w13_weight_scale");
  const std::vector<float> scales = host_values(w13_scale.data);  // [E, 2]
  const int64_t experts = layer.local_num_experts(), shard = layer.intermediate_size_per_partition();
  std::vector<float> max_scales(static_cast<size_t>(experts));
  for (int64_t e = 0; e < experts; ++e) {
    max_scales[size_t(e)] = max_of(&scales[size_t(2 * e)], 2);
    const Tensor max_scale = scalar_on(max_scales[size_t(e)], device);
    for (int64_t s = 0; s < 2; ++s) {
      const Tensor rows = w13.data.select(0, e).narrow(0, s * shard, shard);  // contiguous rows of expert e
      const Tensor dq = ops::per_tensor_dequantize(ctx, rows, scalar_on(scales[size_t(2 * e + s)], device));
      ops::ScaledFp8QuantOptions o;
      o.scale = max_scale;
      o.output = rows;
      o.out_dtype = w13.data.dtype();
      ops::scaled_fp8_quant(ctx, dq, o);
    }
  }
  w13_scale.data = Tensor::from_vector(max_scales).to(device);  // [E]
}

void Fp8MoEMethod::process_weights_after_loading(const ForwardContext& ctx, FusedMoE& layer) {
  FP8KIT_CHECK_ARG(!prepared_, "{}: process_weights_after_loading already ran", layer.prefix());
  if (block_quant_) {
    // The weights and block scales are used as loaded (e4m3fn on every fp8kit platform).
    FP8KIT_CHECK(config_->activation_scheme == "dynamic", ErrorCode::kInternal,
                 "{}: block quantization with static activations", layer.prefix());
  } else if (!config_->is_checkpoint_fp8_serialized) {
    process_online(ctx, layer);
  } else {
    process_serialized_per_tensor(ctx, layer);
  }
  if (weight_only_) {
    // The Marlin path: activations stay 16-bit; the processed weight scales are kept.
    detail::warn_weight_only_once();
    layer.remove_parameter("w13_input_scale");
    layer.remove_parameter("w2_input_scale");
  }

  PreparedFp8MoE p;
  p.w13 = layer.parameter("w13_weight").data;
  p.w2 = layer.parameter("w2_weight").data;
  p.w13_scale = layer.parameter(block_quant_ ? "w13_weight_scale_inv" : "w13_weight_scale").data;
  p.w2_scale = layer.parameter(block_quant_ ? "w2_weight_scale_inv" : "w2_weight_scale").data;
  if (block_quant_) p.block = std::pair{(*config_->weight_block_size)[0], (*config_->weight_block_size)[1]};
  p.weight_only = weight_only_;
  if (const Parameter* a13 = layer.find_parameter("w13_input_scale")) p.a13_scale = a13->data;
  if (const Parameter* a2 = layer.find_parameter("w2_input_scale")) p.a2_scale = a2->data;
  prepared_ = std::move(p);
}

}  // namespace fp8kit
