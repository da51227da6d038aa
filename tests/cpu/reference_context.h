// cpu_reference_ctx(): a CPU context on the exact reference (Overrides::cpu_backend = kReference),
// for tests of a property only the reference has (the single rounding of an exact sum, say); the
// fast backend's own tests are tests/cpu/test_*_cpu*.cpp. cpu_ctx() (test_context.h) runs the
// default, the fast backend where it serves the problem.
#pragma once

#include "fp8kit/runtime/forward_context.h"

namespace fp8kit {

inline const ForwardContext& cpu_reference_ctx() {
  static const ForwardContext ctx = [] {
    Overrides o;
    o.cpu_backend = CpuBackend::kReference;
    return ForwardContext(Device::cpu(), o);
  }();
  return ctx;
}

}  // namespace fp8kit
