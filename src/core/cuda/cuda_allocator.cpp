#include "core/cuda/cuda_allocator.h"

#include <array>
#include <memory>

#include "core/check.h"
#include "core/cuda/device_guard.h"

namespace fp8kit::cuda {

size_t CachingAllocator::rounded_size(size_t nbytes) {
  constexpr size_t kSmallStep = 512, kLargeStep = size_t(2) << 20, kLarge = size_t(1) << 20;
  const size_t step = nbytes < kLarge ? kSmallStep : kLargeStep;
  return (nbytes + step - 1) / step * step;
}

CachingAllocator::~CachingAllocator() {
  // Process teardown: the driver may already be gone, so errors are ignored.
  for (auto& [size, ptr] : free_blocks_) cudaFree(ptr);
}

void* CachingAllocator::allocate(size_t nbytes) {
  if (nbytes == 0) return nullptr;
  const size_t size = rounded_size(nbytes);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = free_blocks_.find(size);
  void* ptr = nullptr;
  if (it != free_blocks_.end()) {
    ptr = it->second;
    free_blocks_.erase(it);
    stats_.cached -= size;
  } else {
    DeviceGuard guard(device_);
    cudaError_t error = cudaMalloc(&ptr, size);
    if (error == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // clear the sticky-free error state before retrying
      release_cached_locked();
      error = cudaMalloc(&ptr, size);
    }
    if (error == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      fail(ErrorCode::kCuda, "out of memory on cuda:{} allocating {} bytes ({} bytes in use)", device_, nbytes,
           stats_.allocated);
    }
    FP8KIT_CUDA_CHECK(error);
  }
  stats_.allocated += size;
  if (stats_.allocated > stats_.peak_allocated) stats_.peak_allocated = stats_.allocated;
  return ptr;
}

void CachingAllocator::deallocate(void* ptr, size_t nbytes) {
  if (ptr == nullptr) return;
  const size_t size = rounded_size(nbytes);
  std::lock_guard<std::mutex> lock(mutex_);
  free_blocks_.emplace(size, ptr);
  stats_.allocated -= size;
  stats_.cached += size;
}

void CachingAllocator::release_cached_locked() {
  DeviceGuard guard(device_);
  for (auto& [size, ptr] : free_blocks_) FP8KIT_CUDA_CHECK(cudaFree(ptr));
  free_blocks_.clear();
  stats_.cached = 0;
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached_locked();
}

CudaMemoryStats CachingAllocator::stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

CachingAllocator& caching_allocator(int device) {
  constexpr int kMaxDevices = 64;
  static std::mutex mutex;
  // Never destroyed: tensors in static storage may be freed after main returns.
  static auto* allocators = new std::array<std::unique_ptr<CachingAllocator>, kMaxDevices>();
  FP8KIT_CHECK(device >= 0 && device < kMaxDevices, ErrorCode::kInvalidArgument, "invalid CUDA device {}", device);
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = (*allocators)[device];
  if (!slot) slot = std::make_unique<CachingAllocator>(device);
  return *slot;
}

}  // namespace fp8kit::cuda
