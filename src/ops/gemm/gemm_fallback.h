// The generic CUDA kernel of scaled_mm (gemm_fallback.cu): any problem, slow.
#pragma once

#include <cuda_runtime_api.h>

#include "ops/gemm/gemm_args.h"

namespace fp8kit::ops {

void scaled_mm_fallback(const ScaledMmArgs& args, cudaStream_t stream);

}  // namespace fp8kit::ops
