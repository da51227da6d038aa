// The ForwardContext CPU tests run their ops and layers in: the CPU, nothing overridden, its own
// workspace. (ctest runs every test in a process of its own, so one context a process suffices.)
#pragma once

#include "fp8kit/runtime/forward_context.h"

namespace fp8kit {

inline const ForwardContext& cpu_ctx() {
  static const ForwardContext ctx;
  return ctx;
}

// A CPU context with `overrides` (tests of the knobs).
inline ForwardContext cpu_ctx_with(const Overrides& overrides) { return ForwardContext(Device::cpu(), overrides); }

}  // namespace fp8kit
