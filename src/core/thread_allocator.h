// An allocator for the calling thread alone: while one is installed for a device, tensors the
// thread creates on that device take their memory from it, ahead of set_allocator's and the
// default. The CUDA graph capture uses it so that what a captured forward allocates comes from
// the graph's own pool (core/cuda/graph_memory_pool.h) and no other thread's tensors land there.
#pragma once

#include "fp8kit/device.h"

namespace fp8kit {

// Installs `allocator` (nullptr: none) for the calling thread on `device`; returns the previous one.
Allocator* set_thread_allocator(Device device, Allocator* allocator);

// Installs an allocator for the thread for as long as it lives, then restores the previous one.
class ThreadAllocatorScope {
 public:
  ThreadAllocatorScope(Device device, Allocator* allocator)
      : device_(device), previous_(set_thread_allocator(device, allocator)) {}
  ~ThreadAllocatorScope() { set_thread_allocator(device_, previous_); }
  ThreadAllocatorScope(const ThreadAllocatorScope&) = delete;
  ThreadAllocatorScope& operator=(const ThreadAllocatorScope&) = delete;

 private:
  Device device_;
  Allocator* previous_;
};

}  // namespace fp8kit
