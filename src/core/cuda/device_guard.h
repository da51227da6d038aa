// Makes `device` current for a scope and restores the previous device after it.
#pragma once

#include "core/cuda/cuda_check.h"

namespace fp8kit::cuda {

class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    FP8KIT_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device) FP8KIT_CUDA_CHECK(cudaSetDevice(device));
    device_ = device;
  }
  ~DeviceGuard() {
    if (previous_ != device_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
  int device_ = 0;
};

}  // namespace fp8kit::cuda
