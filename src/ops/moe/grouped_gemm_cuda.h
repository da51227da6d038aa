// Launchers of the fused MoE's grouped GEMMs (GroupedGemmArgs). Each is one launch on `stream`
// with a grid sized from host-known bounds; CTAs read num_post_pad on the device and leave when
// past it: no host synchronization, CUDA-graph capturable. Expect the device to be current.
// Tests: tests/gpu/test_fused_experts_cuda.cpp.
#pragma once

#include <string>

#include <cuda_runtime_api.h>

#include "ops/moe/grouped_gemm_args.h"

namespace fp8kit::ops {

// What both sm_90 grouped GEMMs (this one and grouped_gemm_sm90_sorted) need: sm_90, FP8 W8A8
// e4m3 operands, 16-byte rows and bases for TMA, dimensions in TMA's range, experts that do not
// overlap. An empty string when `args` meets it, else why not.
std::string grouped_gemm_sm90_tma_rejects(const GroupedGemmArgs& args, int device);

// FP8 warpgroup MMA (wgmma m64nNk32 e4m3, sm_90a; block_m 16, 64 or 128). An empty string when
// it can run `args` on `device`, else why not (the caller then takes grouped_gemm_sm90_e4m3).
std::string grouped_gemm_sm90_wgmma_rejects(const GroupedGemmArgs& args, int device);
void grouped_gemm_sm90_wgmma(const GroupedGemmArgs& args, cudaStream_t stream);

// FP8 tensor cores (mma.sync m16n8k32 e4m3, sm_89+). An empty string when it can run `args` on
// `device`, else why not (the caller then takes grouped_gemm_simt).
std::string grouped_gemm_sm90_e4m3_rejects(const GroupedGemmArgs& args, int device);
void grouped_gemm_sm90_e4m3(const GroupedGemmArgs& args, cudaStream_t stream);

// CUDA cores, every ExpertQuant and dtype, any shape (block_m % 16 == 0). The correct-for-all path.
void grouped_gemm_simt(const GroupedGemmArgs& args, cudaStream_t stream);

}  // namespace fp8kit::ops
