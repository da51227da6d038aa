// A barrier across the blocks of one grid, for kernels launched with at most one block a
// multiprocessor (each of their blocks fits any multiprocessor once that multiprocessor's other
// work ends), so that every block becomes resident while the first ones wait. The counter is
// zeroed in stream order before the launch; it ends at gridDim.x. Used where a reduction over the
// whole grid sits between two passes over data a block keeps (dynamic per-tensor scales).
#pragma once

#include <cstdint>

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

}  // namespace fp8kit::cuda
