// Layer: the base of fp8kit's layers (spec 1.12, 4): a module path (prefix), a device, named
// Parameters with their weight loaders, and the quantization method the config chose for it.
// The kinds a quantization config dispatches on (spec 1.1 get_quant_method) are LinearBase
// (linear.h), FusedMoE (fused_moe.h, included at the end) and Attention (attention.h).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "fp8kit/layers/parameter.h"

namespace fp8kit {

class QuantizeMethod;

// Tensor parallelism of one layer: this rank's place among tp_size ranks. (MoE layers add their
// expert parallelism in FusedMoEOptions.)
struct ParallelConfig {
  int tp_rank = 0;
  int tp_size = 1;
};

class Layer {
 public:
  explicit Layer(std::string prefix = "", Device device = Device::cpu());
  virtual ~Layer();
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const std::string& prefix() const { return prefix_; }
  Device device() const { return device_; }

  // Adds a parameter; Error(kInternal) if the name is taken (vLLM's set_weight_attrs assert).
  Parameter& register_parameter(Parameter parameter);
  Parameter* find_parameter(std::string_view name);  // nullptr when absent
  const Parameter* find_parameter(std::string_view name) const;
  // Error(kInvalidArgument) naming the layer and the parameter when absent.
  Parameter& parameter(std::string_view name);
  const Parameter& parameter(std::string_view name) const;
  void remove_parameter(std::string_view name);  // the spec's `del layer.x`
  const std::map<std::string, Parameter, std::less<>>& parameters() const { return parameters_; }

  // Loads checkpoint tensor `loaded` into parameter `name`, as shard `shard` of a fused layer
  // (vLLM's weight_loader / weight_loader_v2). The base class loads kPlain parameters; layers
  // override it for their sharding rules. Errors name the layer, parameter and shapes.
  virtual void load_weight(std::string_view name, const Tensor& loaded, const std::optional<ShardId>& shard);

  // The quantization method the config chose (nullptr when none applies).
  QuantizeMethod* quant_method() const { return quant_method_.get(); }

 protected:
  void set_quant_method(std::unique_ptr<QuantizeMethod> method);

 private:
  std::string prefix_;
  Device device_;
  std::map<std::string, Parameter, std::less<>> parameters_;
  std::unique_ptr<QuantizeMethod> quant_method_;
};

class FusedMoE;  // fused_moe.h

}  // namespace fp8kit

// The MoE layer, complete for every user of this header (a config dispatches on it).
#include "fp8kit/layers/fused_moe.h"
