// sm90_e4m3_gemm_decode: scaled_mm for decode sizes (M <= 64) as one pass over the weights, on
// sm_90 (wgmma). Its problems and tiling come from gemm_config.h (decode_rejects, plan_decode_gemm).
#pragma once

#include <cuda_runtime_api.h>

#include "ops/gemm/gemm_args.h"
#include "ops/gemm/gemm_config.h"

namespace fp8kit::ops {

// Runs `args` (decode_rejects(describe(args, arch)) == "") with `plan` on `stream`. With more
// than one K-split it allocates a [splits, M, N] f32 workspace from the caching allocator.
void sm90_e4m3_gemm_decode(const ScaledMmArgs& args, const DecodeGemmPlan& plan, cudaStream_t stream);

}  // namespace fp8kit::ops
