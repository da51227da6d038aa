// The weight-streaming W8A16 kernel for decode sizes (weight_only_decode.cu), used by
// weight_only_mm_cuda when it serves the problem.
#pragma once

#include <cuda_runtime_api.h>

#include "ops/gemm/gemm_args.h"

namespace fp8kit::ops {

inline constexpr int64_t kWeightOnlyDecodeMaxM = 8;

// M <= 8, K a multiple of 16, 16-byte aligned weight and activation rows, block_k a multiple of 16.
bool weight_only_decode_serves(const WeightOnlyMmArgs& args);
void weight_only_decode_cuda(const WeightOnlyMmArgs& args, cudaStream_t stream);

}  // namespace fp8kit::ops
