// Fp8LinearMethod (spec 1.2-1.5): FP8 linear layers of an Fp8Config, every branch of the spec.
//   create_weights: weight [N, K] (e4m3fn when the checkpoint is FP8, params_dtype for online
//     quantization); per-tensor: weight_scale [S] per logical shard and (static) input_scale [S],
//     both filled with the not-loaded sentinel -FLT_MAX; block: weight_scale_inv
//     [ceil(N/bn), ceil(K/bk)] with the spec's divisibility errors (merged layers at TP=1 too).
//   process_weights_after_loading: (A) block: kept as is; (B) online: dynamic per-tensor
//     quantization of the whole fused weight; (C) serialized per-tensor: requantize_with_max_scale
//     across logical shards, weight kept as the [K, N] column-major view, input_scale = max;
//     (D) weight-only (the spec's Marlin path) when the device lacks FP8 tensor cores (capability
//     < 89) or FP8KIT_FORCE_WEIGHT_ONLY=1: per-shard scales kept (mapped to rows by
//     logical_widths: hazard H4 fixed), activations stay 16-bit.
//   apply: weight-only -> weight_only_mm; block -> 1 x bk groups + block scaled_mm; per-tensor ->
//     Fp8LinearOp: static input scale, or dynamic per-token activations where the spec's CUTLASS
//     path would run (every fp8kit backend), output dtype = the layer's params dtype.
#pragma once

#include "fp8kit/layers/quantize_method.h"

namespace fp8kit {

class Fp8LinearMethod : public LinearMethodBase {
 public:
  explicit Fp8LinearMethod(const Fp8Config& config);
  std::string name() const override { return "Fp8LinearMethod"; }
  const Fp8Config& quant_config() const { return config_; }

  void create_weights(LinearBase& layer, int64_t input_size_per_partition,
                      const std::vector<int64_t>& output_partition_sizes, int64_t input_size, int64_t output_size,
                      DType params_dtype) override;
  void process_weights_after_loading(LinearBase& layer) override;
  Tensor apply(LinearBase& layer, const Tensor& x, const Tensor& bias) override;

  bool block_quant() const { return block_quant_; }
  // Whether `layer` gets the weight-only path: its device is CUDA with capability < 89, or
  // FP8KIT_FORCE_WEIGHT_ONLY=1. create_weights decides it once per layer (weight_only()).
  bool use_weight_only(const LinearBase& layer) const;
  bool weight_only() const { return weight_only_; }

 private:
  const Fp8Config& config_;
  bool block_quant_ = false;
  bool weight_only_ = false;
  bool processed_ = false;  // process_weights_after_loading ran (apply needs it; it runs once)
};

}  // namespace fp8kit
