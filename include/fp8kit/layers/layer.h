// The layer kinds a quantization config dispatches on (spec 1.1 get_quant_method): linear layers
// (LinearBase family), fused mixture-of-experts, attention. Minimal here; the layer classes grow
// their parameters and weight loaders with the layers themselves.
#pragma once

#include <string>

namespace fp8kit {

class Layer {
 public:
  virtual ~Layer() = default;
};

class LinearBase : public Layer {};
class FusedMoE : public Layer {};
class Attention : public Layer {};

}  // namespace fp8kit
