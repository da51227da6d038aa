// What the two halves of Fp8LinearMethod share (fp8_linear_method.cpp: create_weights and apply;
// fp8_linear_method_process.cpp: process_weights_after_loading).
#pragma once

#include <cfloat>

#include "fp8kit/tensor.h"

namespace fp8kit::detail {

// torch.finfo(torch.float32).min: the value of a scale slot no checkpoint tensor has filled.
inline constexpr float kScaleNotLoaded = -FLT_MAX;

// The spec's weight-only warning (spec 1.14), logged once per process.
void warn_weight_only_once();
// Lets the next warn_weight_only_once() log again (tests of the warning).
void reset_weight_only_warning();

}  // namespace fp8kit::detail
