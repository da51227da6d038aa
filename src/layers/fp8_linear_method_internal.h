// What the two halves of Fp8LinearMethod share (fp8_linear_method.cpp: create_weights and apply;
// fp8_linear_method_process.cpp: process_weights_after_loading), and with Fp8MoEMethod's.
#pragma once

#include <cfloat>
#include <vector>

#include "fp8kit/tensor.h"

namespace fp8kit::detail {

// torch.finfo(torch.float32).min: the value of a scale slot no checkpoint tensor has filled.
inline constexpr float kScaleNotLoaded = -FLT_MAX;

// The spec's weight-only warning (spec 1.14), logged once per process.
void warn_weight_only_once();
// Lets the next warn_weight_only_once() log again (tests of the warning).
void reset_weight_only_warning();

// The scales of a parameter as host floats (a few per layer; block scales a few thousand).
inline std::vector<float> host_values(const Tensor& t) {
  const Tensor h = t.to(Device::cpu()).contiguous();
  const float* p = h.data<float>();
  return std::vector<float>(p, p + h.numel());
}

// A 0-d f32 tensor on `device`.
inline Tensor scalar_on(float value, Device device) { return Tensor::scalar_f32(value).to(device); }

}  // namespace fp8kit::detail
