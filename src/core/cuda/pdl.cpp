// pdl_enabled (pdl.h).
#include "core/cuda/pdl.h"

#include <cuda_runtime_api.h>

#include <array>
#include <atomic>

#include "core/cuda/cuda_check.h"
#include "fp8kit/runtime/overrides.h"

namespace fp8kit::cuda {

bool pdl_enabled(int device) {
  if (!process_overrides().pdl) return false;
  constexpr int kMaxDevices = 64;
  static std::array<std::atomic<int>, kMaxDevices> major{};  // 0: not asked yet
  if (device < 0 || device >= kMaxDevices) return false;
  int m = major[size_t(device)].load(std::memory_order_relaxed);
  if (m == 0) {
    FP8KIT_CUDA_CHECK(cudaDeviceGetAttribute(&m, cudaDevAttrComputeCapabilityMajor, device));
    major[size_t(device)].store(m, std::memory_order_relaxed);
  }
  return m >= 9;
}

}  // namespace fp8kit::cuda
