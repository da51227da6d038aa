// scaled_mm through cuBLASLt's FP8 matmul (gemm_cublaslt.cu).
#pragma once

#include <cuda_runtime_api.h>

#include "ops/gemm/gemm_args.h"

namespace fp8kit::ops {

// Returns false when cuBLASLt finds no algorithm for the problem (the caller falls back).
bool scaled_mm_cublaslt(const ScaledMmArgs& args, cudaStream_t stream);

}  // namespace fp8kit::ops
