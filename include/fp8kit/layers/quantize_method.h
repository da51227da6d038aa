// QuantizeMethod (the spec's QuantizeMethodBase) and the bases of the methods per layer kind:
// LinearMethodBase (linear layers: unquantized_linear_method.h, fp8_linear_method.h) and
// BaseKVCacheMethod (attention: kv_cache_method.h). A method creates its layer's parameters,
// post-processes them once after loading, and runs the layer's forward.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fp8kit/tensor.h"

namespace fp8kit {

class Fp8Config;
class LinearBase;

class QuantizeMethod {
 public:
  virtual ~QuantizeMethod() = default;
  // The spec's class name: "UnquantizedLinearMethod", "Fp8LinearMethod", "Fp8MoEMethod",
  // "Fp8KVCacheMethod".
  virtual std::string name() const = 0;
};

class LinearMethodBase : public QuantizeMethod {
 public:
  // Registers the layer's parameters for this rank's partition (spec 1.2).
  virtual void create_weights(LinearBase& layer, int64_t input_size_per_partition,
                              const std::vector<int64_t>& output_partition_sizes, int64_t input_size,
                              int64_t output_size, DType params_dtype) = 0;
  // Once, after every checkpoint tensor is loaded (spec 1.3).
  virtual void process_weights_after_loading(LinearBase& layer) = 0;
  // y = x W^T (+ bias), in the layer's output dtype (spec 1.4). bias may be undefined.
  virtual Tensor apply(LinearBase& layer, const Tensor& x, const Tensor& bias) = 0;
};

// The MoE method of the FP8 config; its work comes with the MoE layer.
class Fp8MoEMethod : public QuantizeMethod {
 public:
  explicit Fp8MoEMethod(const Fp8Config& config) : config_(config) {}
  std::string name() const override { return "Fp8MoEMethod"; }
  const Fp8Config& quant_config() const { return config_; }

 private:
  const Fp8Config& config_;
};

}  // namespace fp8kit
