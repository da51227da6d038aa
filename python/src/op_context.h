// The ForwardContext a binding runs an op in, and the way it runs: the GIL released for the
// duration of the op (fp8kit never calls back into Python from an op), the scratch workspace
// reset after it. One context per (device, stream) and calling thread, created on first use with
// the process's overrides (FP8KIT_* parsed once), so the workspace is reused call after call.
#pragma once

#include <cstdint>
#include <utility>

#include <nanobind/nanobind.h>

#include "fp8kit/runtime/forward_context.h"
#include "fp8kit/tensor.h"

namespace fp8kit::python {

// `stream` is a cudaStream_t as an integer (0: the legacy default stream); ignored on the CPU.
const ForwardContext& context_for(Device device, uintptr_t stream);

// Runs op(ctx) without the GIL on the context of `device` and `stream`.
template <typename Op>
auto run_op(Device device, uintptr_t stream, Op&& op) {
  const ForwardContext& ctx = context_for(device, stream);
  struct ResetWorkspace {
    const ForwardContext& ctx;
    ~ResetWorkspace() { ctx.workspace().reset(); }
  } reset{ctx};
  nanobind::gil_scoped_release released;
  return std::forward<Op>(op)(ctx);
}

}  // namespace fp8kit::python
