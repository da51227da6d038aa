// The default allocator of CUDA tensors: a caching allocator per device. Freed blocks are kept
// by rounded size (512 B steps below 1 MiB, 2 MiB steps above) and handed out again, so steady
// workloads stop calling cudaMalloc/cudaFree (which synchronize the device). When cudaMalloc runs
// out of memory, the cache is returned to the driver and the allocation retried once.
//
// Like PyTorch's allocator, a freed block may be reused at once by work on any stream: work that
// frees a tensor on one stream and allocates on another must order the two streams itself.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>

#include "fp8kit/device.h"
#include "fp8kit/platform.h"

namespace fp8kit::cuda {

class CachingAllocator final : public Allocator {
 public:
  explicit CachingAllocator(int device) : device_(device) {}
  ~CachingAllocator() override;
  Device device() const override { return Device::cuda(device_); }
  void* allocate(size_t nbytes) override;
  void deallocate(void* ptr, size_t nbytes) override;
  void empty_cache();
  CudaMemoryStats stats();

  static size_t rounded_size(size_t nbytes);

 private:
  void release_cached_locked();

  int device_;
  std::mutex mutex_;
  std::multimap<size_t, void*> free_blocks_;  // rounded size -> block
  CudaMemoryStats stats_;
};

CachingAllocator& caching_allocator(int device);

}  // namespace fp8kit::cuda
