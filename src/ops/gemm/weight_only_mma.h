// The tensor-core W8A16 kernels behind weight_only_mm_cuda: the weight-streaming one for few rows
// (weight_only_mma.cu) and the tiled one for many (weight_only_tiled.cu).
#pragma once

#include <cuda_runtime_api.h>

#include "ops/gemm/gemm_args.h"

namespace fp8kit::ops {

inline constexpr int64_t kWeightOnlyMmaMaxM = 64;
// weight_only_mm_cuda's choice: the tiled kernel from this many rows, the streaming one below.
inline constexpr int64_t kWeightOnlyTiledMinM = 33;

// Both: sm_80+, K a multiple of 16, 16-byte aligned weight and activation rows.
// Streaming: 1 <= M <= 64, block scales with block_k a multiple of 64.
bool weight_only_mma_serves(const WeightOnlyMmArgs& args, int device);
void weight_only_mma_cuda(const WeightOnlyMmArgs& args, cudaStream_t stream);
// Tiled: any M, block scales with block_k a multiple of 32 and block_n of 32.
bool weight_only_tiled_serves(const WeightOnlyMmArgs& args, int device);
void weight_only_tiled_cuda(const WeightOnlyMmArgs& args, cudaStream_t stream);

}  // namespace fp8kit::ops
