// Which grouped GEMM kernel (grouped_gemm_cuda.h) runs a fused MoE GEMM, with which moe_align
// block size. Used by fused_experts_cuda.cpp and by bench/bench_moe.cpp (its GEMM-alone timing).
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "ops/moe/fused_experts_args.h"
#include "ops/moe/grouped_gemm_args.h"

namespace fp8kit::ops {

enum class GroupedKernel { kWgmma, kMma, kSimt };

// FP8KIT_MOE_GEMM=simt|mma forces the CUDA-core or the mma.sync kernel; otherwise FP8 W8A8 takes
// wgmma on sm_90 and mma.sync on other GPUs (which fall back to the CUDA-core kernel below sm_89),
// and every other ExpertQuant the CUDA-core kernel.
GroupedKernel preferred_grouped_kernel(ExpertQuant quant, int device);

// The moe_align block size = the GEMMs' token tile for `slots` routed slots over
// `global_num_experts` (FP8KIT_MOE_BLOCK_M=16|64|128 forces it).
int64_t grouped_block_m(int64_t slots, int64_t global_num_experts, GroupedKernel kernel);

// Runs `g` on `kernel`, or on the next kernel down (mma.sync, then CUDA cores) where it rejects `g`.
void run_grouped_gemm(const GroupedGemmArgs& g, GroupedKernel kernel, int device, cudaStream_t stream);

}  // namespace fp8kit::ops
