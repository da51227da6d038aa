// Launchers of the top-k routing kernel (fused_topk, grouped_topk) and of the EPLB kernel
// (kernels: routing_kernels.cuh; reference: routing_ref.cpp). One launch each, nothing waits for
// the device. Tests: tests/gpu/test_moe_routing_cuda.cpp.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "core/cuda/cuda_check.h"
#include "fp8kit/error.h"
#include "ops/moe/routing_cuda.h"
#include "ops/moe/routing_kernels.cuh"

namespace fp8kit::ops {

namespace {

cudaStream_t to_cuda(Stream stream) { return static_cast<cudaStream_t>(stream.handle); }

int max_shared_optin() {
  int device = 0, bytes = 0;
  FP8KIT_CUDA_CHECK(cudaGetDevice(&device));
  FP8KIT_CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return bytes;
}

}  // namespace

void topk_cuda(const TopkArgs& args, Stream stream) {
  if (args.m == 0) return;
  constexpr int64_t kDefaultShared = 48 * 1024;
  constexpr int64_t kMaxWarps = 4;  // 128 threads: enough rows in flight per SM at E = 256
  const int64_t per_warp = kernels::topk_warp_scratch_bytes(args.num_experts, args.num_expert_group);
  int64_t warps = std::clamp<int64_t>(kDefaultShared / per_warp, 1, kMaxWarps);
  warps = std::min(warps, args.m);
  const int64_t shared = warps * per_warp;
  if (shared > kDefaultShared) {
    if (shared > max_shared_optin()) {
      throw Error(ErrorCode::kUnsupported, "fused_topk/grouped_topk on CUDA: " + std::to_string(args.num_experts) +
                                               " experts need more shared memory than the device has per block");
    }
    FP8KIT_CUDA_CHECK(
        cudaFuncSetAttribute(kernels::topk_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared)));
  }
  const int64_t blocks = std::min<int64_t>((args.m + warps - 1) / warps, int64_t(1) << 20);
  kernels::topk_kernel<<<unsigned(blocks), unsigned(warps * kernels::kWarpSize), size_t(shared), to_cuda(stream)>>>(args);
  FP8KIT_CHECK_LAUNCH(to_cuda(stream), "topk_kernel");
}

void eplb_cuda(const EplbArgs& args, Stream stream) {
  if (args.numel == 0) return;
  constexpr int64_t kThreads = 256;
  const int64_t blocks = std::min<int64_t>((args.numel + kThreads - 1) / kThreads, int64_t(1) << 16);
  kernels::eplb_kernel<<<unsigned(blocks), unsigned(kThreads), 0, to_cuda(stream)>>>(args);
  FP8KIT_CHECK_LAUNCH(to_cuda(stream), "eplb_kernel");
}

}  // namespace fp8kit::ops
