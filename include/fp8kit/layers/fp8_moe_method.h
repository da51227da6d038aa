// Fp8MoEMethod (spec 1.8, 1.14): the FP8 method of MoE layers, every branch of the spec.
//   create_weights: w13_weight [E, 2I, H], w2_weight [E, H, I] (e4m3fn when the checkpoint is FP8,
//     params_dtype for online quantization). Per-tensor: w13_weight_scale [E, 2] (w1 slot 0, w3
//     slot 1) and w2_weight_scale [E], filled with 1.0 as in the spec (not a sentinel: a missing
//     scale silently means 1.0, hazard H5). Block: w13_weight_scale_inv [E, 2 ceil(I/bn),
//     ceil(H/bk)], w2_weight_scale_inv [E, ceil(H/bn), ceil(I/bk)], ones. Static activations:
//     w13_input_scale [E] and w2_input_scale [E], ones.
//   process_weights_after_loading: block: kept as loaded; online: w13_weight_scale re-created as
//     [E] and every expert's w13 and w2 quantized with its own dynamic per-tensor scale;
//     serialized per-tensor: static input scales reduced to their max (0-dim), each expert's w1
//     and w3 requantized to the larger of their two scales (per_tensor_dequantize to f16, then
//     scaled_fp8_quant with the max), w13_weight_scale [E]. Weight-only (the spec's Marlin path:
//     a CUDA device below capability 89, or FusedMoEOptions::force_weight_only) then drops the input
//     scales and keeps the processed weight scales ([E] or block) for 16-bit activations.
//   apply: select_experts, then ops::fused_experts (use_fp8_w8a8, in place into x), or its
//     weight-only path (a new tensor; x unchanged).
// After processing, the method keeps an immutable PreparedFp8MoE that apply reads (no parameter
// lookup by name on the forward path). The method owns its config.
// Tested by tests/cpu/test_fp8_moe_method*.cpp and tests/cpu/test_fused_moe_forward.cpp.
#pragma once

#include <memory>
#include <optional>
#include <utility>

#include "fp8kit/layers/quantize_method.h"

namespace fp8kit {

// What apply needs, fixed once the weights are processed.
struct PreparedFp8MoE {
  Tensor w13, w2;                // [E, 2I, H], [E, H, I]
  Tensor w13_scale, w2_scale;    // per-tensor [E], or block scales
  Tensor a13_scale, a2_scale;    // static activation scales (0-dim) or undefined
  std::optional<std::pair<int64_t, int64_t>> block;
  bool weight_only = false;
};

class Fp8MoEMethod : public FusedMoEMethodBase {
 public:
  explicit Fp8MoEMethod(std::shared_ptr<const Fp8Config> config);
  std::string name() const override { return "Fp8MoEMethod"; }
  const Fp8Config& quant_config() const { return *config_; }

  // Errors (kInvalidArgument; spec texts): "The output_size of gate's and up's weight = {I} is not
  // divisible by weight quantization block_n = {bn}." (every TP size); with tp_size > 1 "The
  // input_size of down's weight = {I} is not divisible by weight quantization block_k = {bk}.";
  // "Found static activation scheme for checkpoint that was not serialized fp8.".
  void create_weights(FusedMoE& layer, int64_t num_experts, int64_t hidden_size,
                      int64_t intermediate_size_per_partition, DType params_dtype) override;
  // Errors: "QuantConfig has static quantization, but found activation scales are None." when a
  // static layer lacks its input scales. Logs once per process "Found input_scales that are not
  // equal for fp8 MoE layer. Using the maximum across experts for each layer." when they differ.
  void process_weights_after_loading(const ForwardContext& ctx, FusedMoE& layer) override;
  // Weight-only errors (kInvalidArgument): "{activation} not supported for Marlin MoE." and
  // "apply_router_weight_on_input is not supported for Marlin MoE.".
  Tensor apply(const ForwardContext& ctx, FusedMoE& layer, const Tensor& x, const Tensor& router_logits,
               const FusedMoEApplyOptions& options) override;

  bool block_quant() const { return block_quant_; }
  // Whether `layer` gets the weight-only path; create_weights decides it once (weight_only()).
  bool use_weight_only(const FusedMoE& layer) const;
  bool weight_only() const { return weight_only_; }
  // Set by process_weights_after_loading; Error(kInvalidArgument) before.
  const PreparedFp8MoE& prepared() const;

 private:
  void process_online(const ForwardContext& ctx, FusedMoE& layer);
  void process_serialized_per_tensor(const ForwardContext& ctx, FusedMoE& layer);
  std::shared_ptr<const Fp8Config> config_;
  bool block_quant_ = false;
  bool weight_only_ = false;
  std::optional<PreparedFp8MoE> prepared_;
};

namespace detail {
// Lets the next unequal-input-scales warning log again (tests of the warning).
void reset_moe_input_scale_warning();
}  // namespace detail

}  // namespace fp8kit
