// The platform queries of include/fp8kit/platform.h on the CUDA runtime.
#include <cuda_runtime_api.h>

#include "core/check.h"
#include "core/cuda/cuda_allocator.h"
#include "core/cuda/device_guard.h"
#include "fp8kit/platform.h"

namespace fp8kit {
namespace {

void require_device(int device) {
  const int count = cuda_device_count();
  FP8KIT_CHECK(count > 0, ErrorCode::kUnsupported, "no CUDA device is available");
  FP8KIT_CHECK_ARG(device >= 0 && device < count, "CUDA device {} does not exist ({} available)", device, count);
}

int attribute(cudaDeviceAttr attr, int device) {
  require_device(device);
  int value = 0;
  FP8KIT_CUDA_CHECK(cudaDeviceGetAttribute(&value, attr, device));
  return value;
}

}  // namespace

bool cuda_built() { return true; }

int cuda_device_count() {
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();  // no driver or no device: not an error for the caller
      return 0;
    }
    return n;
  }();
  return count;
}

DeviceCapability get_device_capability(int device) {
  return {attribute(cudaDevAttrComputeCapabilityMajor, device), attribute(cudaDevAttrComputeCapabilityMinor, device)};
}

bool has_device_capability(int capability, int device) {
  return cuda_device_count() > device && get_device_capability(device).as_int() >= capability;
}

bool is_device_capability(int capability, int device) {
  return cuda_device_count() > device && get_device_capability(device).as_int() == capability;
}

std::string get_device_name(int device) {
  require_device(device);
  cudaDeviceProp prop{};
  FP8KIT_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return prop.name;
}

int get_cu_count(int device) { return attribute(cudaDevAttrMultiProcessorCount, device); }

size_t get_l2_cache_bytes(int device) { return static_cast<size_t>(attribute(cudaDevAttrL2CacheSize, device)); }

DType fp8_dtype() { return DType::kE4M3FN; }

void device_synchronize(int device) {
  require_device(device);
  cuda::DeviceGuard guard(device);
  FP8KIT_CUDA_CHECK(cudaDeviceSynchronize());
}

void stream_synchronize(Stream stream) {
  FP8KIT_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream.handle)));
}

CudaMemoryStats cuda_memory_stats(int device) { return cuda::caching_allocator(device).stats(); }

void cuda_empty_cache(int device) { cuda::caching_allocator(device).empty_cache(); }

}  // namespace fp8kit
