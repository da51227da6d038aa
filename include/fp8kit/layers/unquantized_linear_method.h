// UnquantizedLinearMethod: linear layers kept in the model dtype (no quantization config, or
// skipped through ignored_layers). weight [N, K] of params_dtype; y = x W^T + bias. After loading it
// keeps the weight tensor for apply.
#pragma once

#include "fp8kit/layers/quantize_method.h"

namespace fp8kit {

class UnquantizedLinearMethod : public LinearMethodBase {
 public:
  std::string name() const override { return "UnquantizedLinearMethod"; }
  void create_weights(LinearBase& layer, int64_t input_size_per_partition,
                      const std::vector<int64_t>& output_partition_sizes, int64_t input_size, int64_t output_size,
                      DType params_dtype) override;
  void process_weights_after_loading(const ForwardContext& ctx, LinearBase& layer) override;
  Tensor apply(const ForwardContext& ctx, LinearBase& layer, const Tensor& x, const Tensor& bias) override;

 private:
  Tensor weight_;  // [N, K], set by process_weights_after_loading
};

}  // namespace fp8kit
