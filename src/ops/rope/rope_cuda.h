// The CUDA launcher of apply_rope (include/fp8kit/ops/rope.h): the RopeArgs of the CPU reference
// (rope_ref.h) with device q/k/positions (inv_freq stays on the host and travels in the kernel's
// parameters, at most kRopeMaxFrequencies of them), one launch on `stream`, no host
// synchronization. cos/sin are computed on the device per token, as the reference does; see
// rope_cuda.cu for which roundings match. Tests: tests/gpu/test_norm_rope_cuda.cpp.
#pragma once

#include <cstddef>
#include <cstdint>

#include "fp8kit/stream.h"
#include "ops/rope/rope_args.h"

namespace fp8kit::ops {

inline constexpr int64_t kRopeMaxFrequencies = 512;  // rotary_dim <= 1024 on CUDA

#if FP8KIT_WITH_CUDA
// Expects args' device to be current (detail::route sets it).
void apply_rope_cuda(const RopeArgs& args, Stream stream);
#else
inline constexpr std::nullptr_t apply_rope_cuda = nullptr;  // detail::route reports the missing backend
#endif

}  // namespace fp8kit::ops
