// Contexts of the bindings' ops (op_context.h): thread-local, so two Python threads never share a
// workspace while their ops run without the GIL.
#include "op_context.h"

#include <map>
#include <memory>
#include <tuple>

#include "fp8kit/runtime/overrides.h"

namespace fp8kit::python {

const ForwardContext& context_for(Device device, uintptr_t stream) {
  using Key = std::tuple<int, int, uintptr_t>;
  thread_local std::map<Key, std::unique_ptr<ForwardContext>> contexts;
  if (device.is_cpu()) stream = 0;
  const Key key{static_cast<int>(device.type), device.index, stream};
  std::unique_ptr<ForwardContext>& ctx = contexts[key];
  if (!ctx) {
    ctx = std::make_unique<ForwardContext>(device, process_overrides(), Stream{reinterpret_cast<void*>(stream)});
  }
  return *ctx;
}

}  // namespace fp8kit::python
