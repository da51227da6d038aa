// Device memory that belongs to captured CUDA graphs. A graph's kernels read and write the
// addresses they had at capture, on every replay, so no other tensor may be given those addresses
// while the graph lives: the blocks a capture allocates (through a ThreadAllocatorScope,
// core/thread_allocator.h) stay in this pool, and a block freed during the capture is reused only
// by later allocations of the same capture (one stream: the graph runs them in capture order).
// Blocks come from the device's caching allocator and go back to it when the pool is retired.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>

#include "fp8kit/device.h"

namespace fp8kit::cuda {

class GraphMemoryPool final : public Allocator {
 public:
  explicit GraphMemoryPool(int device) : device_(device) {}
  GraphMemoryPool(const GraphMemoryPool&) = delete;
  GraphMemoryPool& operator=(const GraphMemoryPool&) = delete;

  Device device() const override { return Device::cuda(device_); }
  // A free block of the pool, or a new one (allowed inside a capture: the caching allocator's
  // cudaMalloc runs in the relaxed capture mode).
  void* allocate(size_t nbytes) override;
  void deallocate(void* ptr, size_t nbytes) override;

  // The graphs that used `pool` are gone: its free blocks return to the caching allocator now,
  // the blocks tensors still hold when they are freed, and the pool deletes itself after the last.
  static void retire(GraphMemoryPool* pool);

 private:
  ~GraphMemoryPool() override = default;

  int device_;
  std::mutex mutex_;
  std::multimap<size_t, void*> free_blocks_;  // rounded size -> block
  size_t outstanding_ = 0;  // blocks tensors hold
  bool retired_ = false;
};

}  // namespace fp8kit::cuda
