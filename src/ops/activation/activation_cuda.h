// The CUDA side of silu_and_mul / gelu_and_mul: one launch on `stream`, no host synchronization.
// Kernel and launcher: activation_cuda.cu. Tests: tests/gpu/test_moe_activation_cuda.cpp.
#pragma once

#include <cstddef>

#include "fp8kit/stream.h"
#include "ops/activation/activation_args.h"

namespace fp8kit::ops {

#if FP8KIT_WITH_CUDA
// Expects args' device to be current (detail::route sets it); rows >= 0, d >= 0.
void act_and_mul_cuda(const ActAndMulArgs& args, Stream stream);
#else
inline constexpr std::nullptr_t act_and_mul_cuda = nullptr;  // detail::route reports the missing backend
#endif

}  // namespace fp8kit::ops
