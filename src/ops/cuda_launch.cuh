// Host-side helpers the launchers of the transformer ops share (kv_cache, attention, norm, rope,
// embedding, sampling): the stream of a Stream, the current device's SM count (cached), grid
// sizes, 16-byte alignment tests and the dispatch from a runtime float dtype to a type.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/cuda/cuda_check.h"
#include "fp8kit/dtype.h"
#include "fp8kit/error.h"
#include "fp8kit/half.h"
#include "fp8kit/stream.h"

namespace fp8kit::ops::cuda_launch {

inline cudaStream_t to_cuda(Stream stream) { return static_cast<cudaStream_t>(stream.handle); }

__host__ __device__ constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The current device (route() makes the inputs' device current).
inline int current_device() {
  int device = 0;
  FP8KIT_CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

// Streaming multiprocessors and compute capability (major * 10 + minor) of the current device,
// asked once per device.
inline int device_attribute(cudaDeviceAttr attribute, int slot) {
  constexpr int kMaxDevices = 64;
  static std::array<std::array<std::atomic<int>, 2>, kMaxDevices> cache{};
  const int device = std::clamp(current_device(), 0, kMaxDevices - 1);
  int value = cache[size_t(device)][size_t(slot)].load(std::memory_order_relaxed);
  if (value == 0) {
    FP8KIT_CUDA_CHECK(cudaDeviceGetAttribute(&value, attribute, current_device()));
    if (slot == 1) {
      int minor = 0;
      FP8KIT_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, current_device()));
      value = value * 10 + minor;
    }
    cache[size_t(device)][size_t(slot)].store(value, std::memory_order_relaxed);
  }
  return value;
}
inline int sm_count() { return device_attribute(cudaDevAttrMultiProcessorCount, 0); }
inline int compute_capability() { return device_attribute(cudaDevAttrComputeCapabilityMajor, 1); }

// A grid-stride kernel's grid for `items` threads' worth of work: at most `waves` * 16 blocks
// of `threads` per SM.
inline unsigned grid_for(int64_t items, int threads, int waves = 4) {
  const int64_t cap = int64_t(sm_count()) * 16 * waves;
  return unsigned(std::clamp<int64_t>(ceil_div(items, threads), 1, cap));
}

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
// Every element offset in `strides` (elements of `element_size` bytes) is a multiple of 16 bytes.
inline bool strides_aligned16(std::initializer_list<int64_t> strides, size_t element_size) {
  for (int64_t s : strides) {
    if ((s * int64_t(element_size)) % 16 != 0) return false;
  }
  return true;
}

// fn(T{}) for the element type of a float dtype (f32, f16, bf16).
template <typename Fn>
void dispatch_float(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kF32: return fn(float{});
    case DType::kF16: return fn(Float16{});
    case DType::kBF16: return fn(BFloat16{});
    default: throw Error(ErrorCode::kInternal, std::string("expected a float dtype, got ") + dtype_name(dtype));
  }
}

}  // namespace fp8kit::ops::cuda_launch
