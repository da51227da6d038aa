// Which grouped GEMM kernel (grouped_gemm_cuda.h) runs a fused MoE GEMM, with which moe_align
// block size. Used by fused_experts_cuda.cpp and by bench/bench_moe.cpp (its GEMM-alone timing).
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "ops/moe/fused_experts_args.h"
#include "ops/moe/grouped_gemm_args.h"
#include "ops/moe/grouped_gemm_choice.h"

namespace fp8kit::ops {

// choose_grouped_kernel for `device` and overrides.moe_gemm.
GroupedKernel preferred_grouped_kernel(ExpertQuant quant, int device, const Overrides& overrides);

// choose_grouped_block_m with overrides.moe_block_m.
int64_t grouped_block_m(int64_t slots, int64_t global_num_experts, GroupedKernel kernel, const Overrides& overrides);

// Runs `g` on `kernel`, or on the next kernel down (mma.sync, then CUDA cores) where it rejects `g`.
void run_grouped_gemm(const GroupedGemmArgs& g, GroupedKernel kernel, int device, cudaStream_t stream);

}  // namespace fp8kit::ops
