// What a device backend (the CUDA build) provides to the device-agnostic core: its default
// allocator, copies that involve its memory, and memset. In a CPU-only build there is none, and
// asking for a CUDA device gives kUnsupported.
#pragma once

#include <cstddef>

#include "fp8kit/device.h"
#include "fp8kit/stream.h"

namespace fp8kit {

class Tensor;

struct DeviceHooks {
  Allocator* (*default_allocator)(int index);
  // Copies between tensors of the same dtype and shape where at least one is on this device.
  // Copies that involve host memory have completed when it returns.
  void (*copy)(Tensor& dst, const Tensor& src, Stream stream);
  // Sets `nbytes` bytes at `ptr` on this device to `byte`, in stream order.
  void (*memset)(void* ptr, int byte, size_t nbytes, Device device, Stream stream);
};

// The hooks of the backend for `type`, or nullptr when this build has none.
const DeviceHooks* device_hooks(DeviceType type);

#if FP8KIT_WITH_CUDA
const DeviceHooks* cuda_device_hooks();  // src/core/cuda/cuda_device_hooks.cpp
#endif

}  // namespace fp8kit
