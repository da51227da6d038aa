// ForwardContext (include/fp8kit/runtime/forward_context.h). Tested by
// tests/cpu/test_forward_context.cpp.
#include "fp8kit/runtime/forward_context.h"

#include <algorithm>

#include "core/parallel.h"

namespace fp8kit {

ForwardContext::ForwardContext(Device device, Overrides overrides, Stream stream)
    : device_(device), stream_(stream), overrides_(overrides), workspace_(std::make_unique<Workspace>(device, stream)) {}

ForwardContext ForwardContext::from_environment(Device device, Stream stream) {
  return ForwardContext(device, process_overrides(), stream);
}

int ForwardContext::num_threads() const {
  const int pool = fp8kit::num_threads();
  return overrides_.num_threads > 0 ? std::min(overrides_.num_threads, pool) : pool;
}

}  // namespace fp8kit
