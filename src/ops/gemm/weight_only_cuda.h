// The CUDA side of weight_only_mm (weight_only_cuda.cu).
#pragma once

#include <cstddef>

#include "fp8kit/stream.h"
#include "ops/gemm/gemm_args.h"

namespace fp8kit::ops {

#if FP8KIT_WITH_CUDA
void weight_only_mm_cuda(const WeightOnlyMmArgs& args, Stream stream);
#else
inline constexpr std::nullptr_t weight_only_mm_cuda = nullptr;  // detail::route reports the missing backend
#endif

}  // namespace fp8kit::ops
