// Checks shared by the ops that take a ForwardContext (kv_cache, attention, norm, rope,
// embedding, sampling): the context's device against the tensors', and the routing of ops that
// have only their CPU reference so far. Messages start with the op's name.
#pragma once

#include <string_view>

#include "fp8kit/runtime/forward_context.h"
#include "fp8kit/tensor.h"

namespace fp8kit::ops::detail {

// `t` (when defined) lives on the context's device.
void require_context_device(std::string_view op, const ForwardContext& ctx, const Tensor& t, std::string_view name);

// The one place where these ops pick a backend: CPU runs the reference; a CUDA device is
// Error(kUnsupported) "<op>: no CUDA kernel yet" (CUDA kernels take the same args structs later).
void require_reference_backend(std::string_view op, Device device);

// The number of parts a CPU op splits its work into: the context's thread count, at least 1.
int work_parts(const ForwardContext& ctx);

// As many parts as `work` fills with at least `per_part` of it each, from 1 to work_parts(ctx): a
// decode step's small ops run on one thread, where a hand-off would cost more than the op.
int work_parts(const ForwardContext& ctx, int64_t work, int64_t per_part);

}  // namespace fp8kit::ops::detail
