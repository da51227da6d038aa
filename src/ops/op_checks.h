// Argument checks and backend routing shared by the op entry points (quant.cpp, quant_weight.cpp,
// gemm.cpp). Every message starts with the op's name and names the argument.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>

#include "core/check.h"
#include "fp8kit/runtime/forward_context.h"
#include "fp8kit/stream.h"
#include "fp8kit/tensor.h"

#if FP8KIT_WITH_CUDA
#include "core/cuda/device_guard.h"
#endif

namespace fp8kit::ops::detail {

void require_defined(std::string_view op, const Tensor& t, std::string_view name);
// kUnsupported for a device this build has no kernels for (a CUDA tensor in a CPU-only build).
void require_backend(std::string_view op, Device device);
// `t` (when defined) lives on the same device as `ref`.
void require_same_device(std::string_view op, const Tensor& t, std::string_view name, const Tensor& ref,
                         std::string_view ref_name);
void require_dim(std::string_view op, const Tensor& t, std::string_view name, int64_t dim);
// f32 | f16 | bf16
void require_float_input(std::string_view op, const Tensor& t, std::string_view name);
// e4m3fn | e4m3fnuz
void require_quant_dtype(std::string_view op, DType dtype, std::string_view name);
// A defined f32 tensor of one element (any shape).
void require_f32_scalar(std::string_view op, const Tensor& t, std::string_view name);
// A preallocated output: defined, `dtype`, `shape`, contiguous, on `device`.
void require_output(std::string_view op, const Tensor& out, std::string_view name, DType dtype, const Shape& shape,
                    Device device);

// `t` itself when contiguous, else a contiguous copy made on `stream` (so the kernel that reads it
// next, queued on the same stream, sees the copy complete).
Tensor contiguous_on(const Tensor& t, Stream stream);

// The stride between consecutive rows (elements [..., :]) when the leading dimensions of `t`
// collapse into one; nullopt when they do not (then the caller copies). A tensor of at most one
// row reports size(-1).
std::optional<int64_t> collapsed_row_stride(const Tensor& t);

// The context of a call serves the inputs' device: a context of another device would queue the
// work on another device's stream (or on none).
void require_context(std::string_view op, const ForwardContext& ctx, Device device);

// The one place where an op picks its backend: the CPU one (<op>_cpu: the fast backend or the
// reference, as ctx.overrides().cpu_backend and the problem decide, on ctx.num_threads() threads),
// or in a CUDA build the launcher (of <op>_cuda.h) that takes the same args, on ctx.stream(), with
// the tensor's device current. A CPU-only build names the launchers as null pointers, never called.
template <typename Args>
void route(std::string_view op, const ForwardContext& ctx, Device device, const Args& args,
           void (*cpu)(const Args&, const Overrides&, int),
           std::type_identity_t<void (*)(const Args&, Stream)> cuda_launcher) {
  require_context(op, ctx, device);
  if (device.is_cpu()) return cpu(args, ctx.overrides(), ctx.num_threads());
#if FP8KIT_WITH_CUDA
  if (device.is_cuda()) {
    cuda::DeviceGuard guard(device.index);
    return cuda_launcher(args, ctx.stream());
  }
#endif
  require_backend(op, device);
  fail(ErrorCode::kInternal, "{}: no backend for {}", op, device.str());
}

// route() for ops that have only the CPU reference (it takes no overrides or threads).
template <typename Args>
void route(std::string_view op, const ForwardContext& ctx, Device device, const Args& args,
           void (*cpu_ref)(const Args&), std::type_identity_t<void (*)(const Args&, Stream)> cuda_launcher) {
  require_context(op, ctx, device);
  if (device.is_cpu()) return cpu_ref(args);
#if FP8KIT_WITH_CUDA
  if (device.is_cuda()) {
    cuda::DeviceGuard guard(device.index);
    return cuda_launcher(args, ctx.stream());
  }
#endif
  require_backend(op, device);
  fail(ErrorCode::kInternal, "{}: no backend for {}", op, device.str());
}

}  // namespace fp8kit::ops::detail
