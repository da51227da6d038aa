// The tensor-core W8A16 kernel for M <= 64 (weight_only_mma.cu), used by weight_only_mm_cuda when
// it serves the problem.
#pragma once

#include <cuda_runtime_api.h>

#include "ops/gemm/gemm_args.h"

namespace fp8kit::ops {

inline constexpr int64_t kWeightOnlyMmaMaxM = 64;

// sm_80+, 1 <= M <= 64, K a multiple of 16, 16-byte aligned weight and activation rows, block_k
// a multiple of 64.
bool weight_only_mma_serves(const WeightOnlyMmArgs& args, int device);
void weight_only_mma_cuda(const WeightOnlyMmArgs& args, cudaStream_t stream);

}  // namespace fp8kit::ops
