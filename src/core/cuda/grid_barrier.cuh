// A barrier across the blocks of one grid, for kernels launched by launch_cooperative with at
// most one block a multiprocessor: the cooperative launch starts the grid only when every block
// can be resident at once, so a block never waits for one that a concurrent kernel (another
// stream's, a persistent one) keeps from starting. The counter is zeroed in stream order before
// the launch; it ends at gridDim.x. Used where a reduction over the whole grid sits between two
// passes over data a block keeps (dynamic per-tensor scales).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

#include "core/cuda/pdl.cuh"

namespace fp8kit::cuda {

// A GPU-scope acquire load: what the writer made visible before its release is visible after it.
__device__ __forceinline__ uint32_t load_acquire(const uint32_t* ptr) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(ptr) : "memory");
  return v;
}

// Called by one thread of each block: its block's earlier global writes (made visible by the
// fence, e.g. an atomic max) are visible to every block once all have returned.
__device__ __forceinline__ void grid_arrive_and_wait(uint32_t* counter) {
  __threadfence();
  atomicAdd(counter, 1u);
  while (load_acquire(counter) < gridDim.x) __nanosleep(64);
}

// kernel<<<grid, block, smem, stream>>>(args...) as a cooperative launch (no programmatic
// dependent launch: the grid starts after the kernel before it has completed; the kernel's
// pdl_wait() is then a no-op). Captures into CUDA graphs as a cooperative kernel node.
template <typename... Params, typename... Args>
void launch_cooperative(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                        Args&&... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeCooperative;
  attribute.val.cooperative = 1;
  launch_with_attribute(attribute, kernel, grid, block, smem, stream, std::forward<Args>(args)...);
}

}  // namespace fp8kit::cuda
