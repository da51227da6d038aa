// Kernel attributes set once per device (CUDA keeps them per device and function).
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "core/cuda/cuda_check.h"

namespace fp8kit::cuda {

// Lets `Kernel` launch with `bytes` of dynamic shared memory on the current device. Each kernel
// (a template argument, so that every kernel has its own flag; kernels of one signature share a
// function-pointer type) remembers the devices it has set; setting the attribute again is
// harmless, so a racy flag is enough.
template <auto Kernel>
void allow_dynamic_smem(int bytes) {
  static std::atomic<uint64_t> configured{0};
  int device = 0;
  FP8KIT_CUDA_CHECK(cudaGetDevice(&device));
  const uint64_t bit = device < 64 ? (uint64_t(1) << device) : 0;
  if (bit == 0 || (configured.load() & bit) == 0) {
    FP8KIT_CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    configured.fetch_or(bit);
  }
}

}  // namespace fp8kit::cuda
