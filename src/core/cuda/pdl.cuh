// Programmatic dependent launch, the device side and the launch (pdl.h says what it is for).
//
// A kernel launched by launch_pdl must call pdl_wait() before it reads anything the kernel before
// it may write, or writes anything that kernel may read; before that it may only set itself up
// and read what no running kernel writes (constant weights; what a kernel two launches back or
// earlier wrote, see below). It calls pdl_allow_dependents() after its pdl_wait(), so that the
// next kernel's CTAs can become resident while it runs: they wait in their own pdl_wait() for
// this grid to complete and its memory to be flushed. Since every kernel allows its dependents
// only after its own wait, a kernel's pre-wait part may read what the kernel two launches back
// wrote. A kernel that writes what its successor reads before waiting (moe_align_block_size's
// routing tables) does not allow dependents early. On a plain launch, or before sm_90, both calls
// do nothing.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "core/cuda/cuda_check.h"
#include "core/cuda/pdl.h"

namespace fp8kit::cuda {

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_allow_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// kernel<<<grid, block, smem, stream>>>(args...) with one launch attribute.
template <typename... Params, typename... Args>
void launch_with_attribute(const cudaLaunchAttribute& attribute, void (*kernel)(Params...), dim3 grid, dim3 block,
                           size_t smem, cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attributes[1] = {attribute};
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attributes;
  config.numAttrs = 1;
  FP8KIT_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

// kernel<<<grid, block, smem, stream>>>(args...), with programmatic dependent launch where
// pdl_enabled (a plain launch otherwise).
template <typename... Params, typename... Args>
void launch_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Args&&... args) {
  int device = 0;
  FP8KIT_CUDA_CHECK(cudaGetDevice(&device));
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = pdl_enabled(device) ? 1 : 0;
  launch_with_attribute(attribute, kernel, grid, block, smem, stream, std::forward<Args>(args)...);
}

}  // namespace fp8kit::cuda
