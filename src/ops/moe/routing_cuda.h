// CUDA launchers of the MoE routing ops, one per args struct of routing_args.h, identical in
// output to the CPU reference of routing_ref.h that takes the same struct. Each is one kernel
// launch on `stream` (no host synchronization, CUDA-graph capturable) and expects the args'
// device to be current (detail::route sets it). Tested by tests/gpu/test_moe_routing_cuda.cpp.
#pragma once

#include <cstddef>

#include "fp8kit/stream.h"
#include "ops/moe/routing_args.h"

namespace fp8kit::ops {

#if FP8KIT_WITH_CUDA

void topk_cuda(const TopkArgs& args, Stream stream);
void eplb_cuda(const EplbArgs& args, Stream stream);
void moe_align_cuda(const MoeAlignArgs& args, Stream stream);

#else

// A CPU-only build has no kernels; detail::route reports the missing backend first.
inline constexpr std::nullptr_t topk_cuda = nullptr;
inline constexpr std::nullptr_t eplb_cuda = nullptr;
inline constexpr std::nullptr_t moe_align_cuda = nullptr;

#endif

}  // namespace fp8kit::ops
