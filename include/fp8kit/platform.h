// The platform layer of the spec (vLLM's current_platform): which CUDA devices exist and what
// they can do. In a CPU-only build there are none: device_count() is 0 and the queries about a
// device throw kUnsupported.
#pragma once

#include <cstddef>
#include <string>

#include "fp8kit/dtype.h"
#include "fp8kit/stream.h"

namespace fp8kit {

// Whether this build has the CUDA backend (it may still find no device).
bool cuda_built();
// Number of CUDA devices visible; 0 without a driver, without devices or in a CPU-only build.
int cuda_device_count();

struct DeviceCapability {
  int major = 0;
  int minor = 0;
  int as_int() const { return major * 10 + minor; }  // 90 for sm_90
};

DeviceCapability get_device_capability(int device = 0);
// capability.as_int() >= `capability` (e.g. has_device_capability(89): FP8 tensor cores).
bool has_device_capability(int capability, int device = 0);
bool is_device_capability(int capability, int device = 0);
std::string get_device_name(int device = 0);
int get_cu_count(int device = 0);  // streaming multiprocessors
size_t get_l2_cache_bytes(int device = 0);
// The FP8 dtype of the platform's kernels: e4m3fn on NVIDIA GPUs and CPUs (e4m3fnuz is ROCm's).
DType fp8_dtype();

// Waits for all work on `device`.
void device_synchronize(int device = 0);
// Waits for all work on `stream`.
void stream_synchronize(Stream stream);

// CUDA caching allocator statistics of one device (bytes).
struct CudaMemoryStats {
  size_t allocated = 0;  // in live tensors
  size_t cached = 0;     // freed and kept for reuse
  size_t peak_allocated = 0;
};
CudaMemoryStats cuda_memory_stats(int device = 0);
// Returns the cached (freed) blocks of `device` to the driver.
void cuda_empty_cache(int device = 0);

}  // namespace fp8kit
