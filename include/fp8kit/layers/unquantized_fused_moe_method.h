// UnquantizedFusedMoEMethod: MoE layers without a quantization config. w13_weight [E, 2I, H] and
// w2_weight [E, H, I] in the model dtype; apply routes with select_experts and runs
// ops::fused_experts' 16-bit path in place into x, as vLLM's forward_cuda does. Tested by
// tests/cpu/test_fused_moe_forward.cpp. After loading it keeps the two weights for apply.
#pragma once

#include "fp8kit/layers/quantize_method.h"

namespace fp8kit {

class UnquantizedFusedMoEMethod : public FusedMoEMethodBase {
 public:
  std::string name() const override { return "UnquantizedFusedMoEMethod"; }
  void create_weights(FusedMoE& layer, int64_t num_experts, int64_t hidden_size,
                      int64_t intermediate_size_per_partition, DType params_dtype) override;
  void process_weights_after_loading(const ForwardContext& ctx, FusedMoE& layer) override;
  Tensor apply(const ForwardContext& ctx, FusedMoE& layer, const Tensor& x, const Tensor& router_logits,
               const FusedMoEApplyOptions& options) override;

 private:
  Tensor w13_, w2_;  // set by process_weights_after_loading
};

}  // namespace fp8kit
