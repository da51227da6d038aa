// What a device backend (the CUDA build) provides to the device-agnostic core: its default
// allocator and copies that involve its memory. The CUDA backend registers itself at start-up;
// in a CPU-only build there is none, and asking for a CUDA device gives kUnsupported.
#pragma once

#include <cstddef>

#include "fp8kit/device.h"

namespace fp8kit {

class Tensor;

struct DeviceHooks {
  Allocator* (*default_allocator)(int index);
  // Copies between tensors of the same dtype and shape where at least one is on this device.
  void (*copy)(Tensor& dst, const Tensor& src);
  // Sets `nbytes` bytes at `ptr` on this device to `byte`.
  void (*memset)(void* ptr, int byte, size_t nbytes, Device device);
};

const DeviceHooks* device_hooks(DeviceType type);
void register_device_hooks(DeviceType type, const DeviceHooks* hooks);

}  // namespace fp8kit
