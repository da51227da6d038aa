// The CUDA side of moe_sum: one launch on `stream`, no host synchronization, bit-exact with
// moe_sum_ref.cpp. Kernel and launcher: moe_sum_cuda.cu. Tests: tests/gpu/test_moe_activation_cuda.cpp
// (moe_sum cases) and through fused_experts (tests/gpu/test_fused_experts_cuda.cpp).
#pragma once

#include <cstddef>

#include "fp8kit/stream.h"
#include "ops/moe/moe_sum_args.h"

namespace fp8kit::ops {

#if FP8KIT_WITH_CUDA
// Expects args' device to be current (detail::route sets it).
void moe_sum_cuda(const MoeSumArgs& args, Stream stream);
#else
inline constexpr std::nullptr_t moe_sum_cuda = nullptr;  // detail::route reports the missing backend
#endif

}  // namespace fp8kit::ops
