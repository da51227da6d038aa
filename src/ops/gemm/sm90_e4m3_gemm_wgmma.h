// sm90_e4m3_gemm_wgmma: scaled_mm for prefill sizes on Hopper's warpgroup MMA (sm_90a), every
// scaling of ScaledMmArgs except block shapes other than 128 x 128. Its problems and tile width
// and grid come from gemm_config.h (wgmma_rejects, plan_wgmma_gemm).
#pragma once

#include <cuda_runtime_api.h>

#include "ops/gemm/gemm_args.h"
#include "ops/gemm/gemm_config.h"

namespace fp8kit::ops {

// Runs `args` (wgmma_rejects(describe(args, 90)) == "") with `plan` (plan_wgmma_gemm with
// args.fast_accum) on `stream`.
void sm90_e4m3_gemm_wgmma(const ScaledMmArgs& args, const WgmmaGemmPlan& plan, cudaStream_t stream);

}  // namespace fp8kit::ops
