// The CUDA side of fused_experts: the chunked pipeline of fused_experts_ref.cpp on one stream
// (quantize -> moe_align_block_size -> grouped GEMM1 -> activation -> quantize -> grouped GEMM2 ->
// moe_sum), with no host synchronization: token counts per expert stay on the device, so the
// call can be captured into a CUDA graph (after a warm-up call, so that the caching allocator
// already holds its scratch sizes). Pipeline: fused_experts_cuda.cpp; kernels: grouped_gemm_*.cu,
// activation_cuda.cu, moe_sum_cuda.cu. Tests: tests/gpu/test_fused_experts_cuda.cpp.
//
// Unlike the reference, the routing inputs are not range-checked (that would need a host
// synchronization; vLLM does not check either): topk_ids outside [0, global_num_experts) are
// skipped by moe_align_block_size and leave their slots' rows undefined, and an expert_map entry
// outside [-1, E) reads out of bounds. Knobs: FP8KIT_MOE_GEMM=simt forces the CUDA-core grouped
// GEMM; FP8KIT_MOE_BLOCK_M=16|64 forces the moe_align block size (else picked from the shapes).
#pragma once

#include <cstddef>

#include "fp8kit/stream.h"
#include "ops/moe/fused_experts_args.h"

namespace fp8kit::ops {

#if FP8KIT_WITH_CUDA
// Expects the args' device to be current (detail::route sets it).
void fused_experts_cuda(const FusedExpertsArgs& args, Stream stream);
#else
inline constexpr std::nullptr_t fused_experts_cuda = nullptr;  // detail::route reports the missing backend
#endif

}  // namespace fp8kit::ops
