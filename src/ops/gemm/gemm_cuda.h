// The CUDA side of scaled_mm: picks a backend for the problem (gemm_config.h) and launches it on
// `stream`. Expects the args' device to be current (detail::route sets it).
#pragma once

#include <cstddef>

#include "fp8kit/stream.h"
#include "ops/gemm/gemm_args.h"

namespace fp8kit::ops {

#if FP8KIT_WITH_CUDA
void scaled_mm_cuda(const ScaledMmArgs& args, Stream stream);
#else
inline constexpr std::nullptr_t scaled_mm_cuda = nullptr;  // detail::route reports the missing backend
#endif

}  // namespace fp8kit::ops
