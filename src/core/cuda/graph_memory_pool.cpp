#include "core/cuda/graph_memory_pool.h"

#include <cuda_runtime.h>

#include "core/cuda/cuda_allocator.h"

namespace fp8kit::cuda {
namespace {

// cudaMalloc is a "potentially unsafe" call during a stream capture of the global or
// thread-local mode; a block the capture needs is allocated in the relaxed mode (the allocation
// itself is not part of the graph: the graph keeps its address).
class RelaxedCaptureMode {
 public:
  RelaxedCaptureMode() { cudaThreadExchangeStreamCaptureMode(&mode_); }
  ~RelaxedCaptureMode() { cudaThreadExchangeStreamCaptureMode(&mode_); }

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

}  // namespace

void* GraphMemoryPool::allocate(size_t nbytes) {
  if (nbytes == 0) return nullptr;
  const size_t size = CachingAllocator::rounded_size(nbytes);
  std::lock_guard<std::mutex> lock(mutex_);
  void* ptr = nullptr;
  if (auto it = free_blocks_.find(size); it != free_blocks_.end()) {
    ptr = it->second;
    free_blocks_.erase(it);
  } else {
    RelaxedCaptureMode relaxed;
    ptr = caching_allocator(device_).allocate(size);
  }
  ++outstanding_;
  return ptr;
}

void GraphMemoryPool::deallocate(void* ptr, size_t nbytes) {
  if (ptr == nullptr) return;
  const size_t size = CachingAllocator::rounded_size(nbytes);
  bool last = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    --outstanding_;
    if (!retired_) {
      free_blocks_.emplace(size, ptr);
      return;
    }
    caching_allocator(device_).deallocate(ptr, size);
    last = outstanding_ == 0;
  }
  if (last) delete this;
}

void GraphMemoryPool::retire(GraphMemoryPool* pool) {
  if (pool == nullptr) return;
  bool empty = false;
  {
    std::lock_guard<std::mutex> lock(pool->mutex_);
    pool->retired_ = true;
    for (auto& [size, ptr] : pool->free_blocks_) caching_allocator(pool->device_).deallocate(ptr, size);
    pool->free_blocks_.clear();
    empty = pool->outstanding_ == 0;
  }
  if (empty) delete pool;
}

}  // namespace fp8kit::cuda
