// Launcher of moe_align_block_size (kernels: moe_align_kernels.cuh; reference: moe_align_ref.cpp).
// One launch up to 8192 slots, else two (counts and offsets in one block, then the placement a
// block per range); nothing waits for the device. Tests: tests/gpu/test_moe_routing_cuda.cpp.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "core/cuda/cuda_check.h"
#include "fp8kit/error.h"
#include "ops/moe/moe_align_kernels.cuh"
#include "ops/moe/routing_cuda.h"

namespace fp8kit::ops {

namespace {

template <typename IdT>
void launch_align(const MoeAlignArgs& args, cudaStream_t s) {
  constexpr int64_t kDefaultShared = 48 * 1024;
  int device = 0, optin = 0;
  FP8KIT_CUDA_CHECK(cudaGetDevice(&device));
  FP8KIT_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  // One warp per 32 slots, at least 8 (the padding sentinels, the block experts and the scans
  // over experts are spread over the block: one warp took 6.5 us for the 8 slots of a decode
  // step over 128 experts) and up to 32, fewer when the histograms would not fit.
  int64_t warps = std::clamp<int64_t>((args.numel + 31) / 32, 8, kMoeAlignMaxWarps);
  while (warps > 1 && kernels::moe_align_shared_bytes(warps, args.num_experts) > optin) --warps;
  const int64_t shared = kernels::moe_align_shared_bytes(warps, args.num_experts);
  if (shared > optin) {
    throw Error(ErrorCode::kUnsupported, "moe_align_block_size on CUDA: " + std::to_string(args.num_experts) +
                                             " experts do not fit the shared memory of one block");
  }
  constexpr auto kAlign = kernels::moe_align_kernel<IdT>;
  if (shared > kDefaultShared) {
    FP8KIT_CUDA_CHECK(cudaFuncSetAttribute(kAlign, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared)));
  }
  // Up to 8192 slots the block places them itself (a second launch costs more than it saves
  // there); beyond, a block per range (32768 slots: 48 -> 26 us).
  const bool place_in_block = args.numel <= 8192;
  kAlign<<<1, unsigned(warps * 32), size_t(shared), s>>>(args, place_in_block);
  FP8KIT_CHECK_LAUNCH(s, "moe_align_kernel");
  if (place_in_block) return;
  constexpr auto kPlace = kernels::moe_align_place_kernel<IdT>;
  const int64_t place_shared = args.num_experts * 4;
  if (place_shared > kDefaultShared) {
    FP8KIT_CUDA_CHECK(cudaFuncSetAttribute(kPlace, cudaFuncAttributeMaxDynamicSharedMemorySize, int(place_shared)));
  }
  kPlace<<<unsigned(warps), 32, size_t(place_shared), s>>>(args);
  FP8KIT_CHECK_LAUNCH(s, "moe_align_place_kernel");
}

}  // namespace

void moe_align_cuda(const MoeAlignArgs& args, Stream stream) {
  const cudaStream_t s = static_cast<cudaStream_t>(stream.handle);
  if (args.ids_dtype == DType::kI64) {
    launch_align<int64_t>(args, s);
  } else {
    launch_align<int32_t>(args, s);
  }
}

}  // namespace fp8kit::ops
