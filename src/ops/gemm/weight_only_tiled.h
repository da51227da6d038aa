// The tiled tensor-core W8A16 kernel for many rows (weight_only_tiled.cu), used by
// weight_only_mm_cuda from kWeightOnlyTiledMinM rows.
#pragma once

#include <cuda_runtime_api.h>

#include "ops/gemm/gemm_args.h"

namespace fp8kit::ops {

// weight_only_mm_cuda's choice: the tiled kernel from this many rows (below, the streaming kernel
// of weight_only_mma.cu).
inline constexpr int64_t kWeightOnlyTiledMinM = 33;

// sm_80+, K a multiple of 16, 16-byte aligned weight and activation rows; block scales with
// block_k a multiple of 64 and block_n of 32.
bool weight_only_tiled_serves(const WeightOnlyMmArgs& args, int device);
void weight_only_tiled_cuda(const WeightOnlyMmArgs& args, cudaStream_t stream);

}  // namespace fp8kit::ops
