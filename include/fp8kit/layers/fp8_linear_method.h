// Fp8LinearMethod (spec 1.2-1.5): FP8 linear layers of an Fp8Config, every branch of the spec.
//   create_weights: weight [N, K] (e4m3fn when the checkpoint is FP8, params_dtype for online
//     quantization); per-tensor: weight_scale [S] per logical shard and (static) input_scale [S],
//     both filled with the not-loaded sentinel -FLT_MAX; block: weight_scale_inv
//     [ceil(N/bn), ceil(K/bk)] with the spec's divisibility errors (merged layers at TP=1 too).
//   process_weights_after_loading: (A) block: kept as is; (B) online: dynamic per-tensor
//     quantization of the whole fused weight; (C) serialized per-tensor: requantize_with_max_scale
//     across logical shards, weight kept as the [K, N] column-major view, input_scale = max;
//     (D) weight-only (the spec's Marlin path) when the device lacks FP8 tensor cores (capability
//     < 89) or LinearOptions::force_weight_only: per-shard scales kept (mapped to rows by
//     logical_widths: hazard H4 fixed), activations stay 16-bit.
//   apply: weight-only -> weight_only_mm; block -> 1 x bk groups + block scaled_mm; per-tensor ->
//     Fp8LinearOp: static input scale, or dynamic per-token activations where the spec's CUTLASS
//     path would run (every fp8kit backend), output dtype = the layer's params dtype.
// After processing, the method keeps an immutable PreparedFp8Linear that apply reads (no
// parameter lookup by name on the forward path). The method owns its config.
#pragma once

#include <memory>
#include <optional>
#include <utility>

#include "fp8kit/layers/quantize_method.h"
#include "fp8kit/ops/linear.h"

namespace fp8kit {

// What apply needs, fixed once the weights are processed.
struct PreparedFp8Linear {
  Tensor weight;        // [K, N] column-major view (per-tensor, online, weight-only) or [N, K] (block)
  Tensor weight_scale;  // 0-dim / [1] per tensor, [N] per row (weight-only shards), or block scales
  std::optional<std::pair<int64_t, int64_t>> block;  // {block_n, block_k}
  bool weight_only = false;
  ops::ActivationQuant activation = ops::ActivationQuant::kDynamicPerToken;
  Tensor input_scale;  // kStatic: 0-dim
  DType out_dtype = DType::kBF16;
};

class Fp8LinearMethod : public LinearMethodBase {
 public:
  explicit Fp8LinearMethod(std::shared_ptr<const Fp8Config> config);
  std::string name() const override { return "Fp8LinearMethod"; }
  const Fp8Config& quant_config() const { return *config_; }

  void create_weights(LinearBase& layer, int64_t input_size_per_partition,
                      const std::vector<int64_t>& output_partition_sizes, int64_t input_size, int64_t output_size,
                      DType params_dtype) override;
  void process_weights_after_loading(const ForwardContext& ctx, LinearBase& layer) override;
  Tensor apply(const ForwardContext& ctx, LinearBase& layer, const Tensor& x, const Tensor& bias) override;

  bool block_quant() const { return block_quant_; }
  // Whether `layer` gets the weight-only path: its device is CUDA with capability < 89, or the
  // layer was built with force_weight_only. create_weights decides it once per layer
  // (weight_only()).
  bool use_weight_only(const LinearBase& layer) const;
  bool weight_only() const { return weight_only_; }
  // Set by process_weights_after_loading; Error(kInvalidArgument) before.
  const PreparedFp8Linear& prepared() const;

 private:
  std::shared_ptr<const Fp8Config> config_;
  bool block_quant_ = false;
  bool weight_only_ = false;
  std::optional<PreparedFp8Linear> prepared_;  // process_weights_after_loading ran (it runs once)
};

}  // namespace fp8kit
