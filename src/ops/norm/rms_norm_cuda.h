// The CUDA launcher of rms_norm / fused_add_rms_norm (include/fp8kit/ops/norm.h): the RmsNormArgs
// of the CPU reference (rms_norm_ref.h) with device pointers, one launch on `stream`, no host
// synchronization, bit-exact with the reference (rms_norm_math.h gives both the same r).
// Kernel: rms_norm_cuda.cu. Tests: tests/gpu/test_norm_rope_cuda.cpp.
#pragma once

#include <cstddef>

#include "fp8kit/stream.h"
#include "ops/norm/rms_norm_args.h"

namespace fp8kit::ops {

#if FP8KIT_WITH_CUDA
// Expects args' device to be current (detail::route sets it).
void rms_norm_cuda(const RmsNormArgs& args, Stream stream);
#else
inline constexpr std::nullptr_t rms_norm_cuda = nullptr;  // detail::route reports the missing backend
#endif

}  // namespace fp8kit::ops
