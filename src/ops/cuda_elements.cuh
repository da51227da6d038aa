// Device helpers of the transformer-op kernels: exact widening of f32 / f16 / bf16 elements to
// f32 (the reference's to_float), rounding back with fp8kit's own from_float (half.h, the
// reference's), and runs of elements moved as one 16-byte vector.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "fp8kit/dtype.h"
#include "fp8kit/half.h"

namespace fp8kit::ops::elements {

__device__ __forceinline__ float widen(float x) { return x; }
__device__ __forceinline__ float widen(BFloat16 x) { return __uint_as_float(uint32_t(x.bits) << 16); }
__device__ __forceinline__ float widen(Float16 x) { return __half2float(__ushort_as_half(x.bits)); }

// The two 16-bit elements of a 32-bit word (element 0 in the low half) as f32, exactly.
template <typename T>
__device__ __forceinline__ void widen_pair(uint32_t w, float& lo, float& hi) {
  static_assert(sizeof(T) == 2, "16-bit element types only");
  if constexpr (DTypeOf<T>::value == DType::kBF16) {
    lo = __uint_as_float(w << 16);
    hi = __uint_as_float(w & 0xffff0000u);
  } else {
    lo = __half2float(__ushort_as_half(uint16_t(w)));
    hi = __half2float(__ushort_as_half(uint16_t(w >> 16)));
  }
}

template <typename T>
__device__ __forceinline__ T narrow(float v) {
  return from_float<T>(v);  // round to nearest even, NaN kept (half.h), as the CPU reference
}

// kV consecutive elements of T; moved as one 16-byte vector when they are 16 bytes (the caller
// guarantees the alignment), else element by element.
template <typename T, int kV>
struct Run {
  static constexpr bool kVector = kV * sizeof(T) == 16;
  alignas(kVector ? 16 : alignof(T)) T e[kV];

  __device__ __forceinline__ void load(const T* p) {
    if constexpr (kVector) {
      *reinterpret_cast<uint4*>(e) = *reinterpret_cast<const uint4*>(p);
    } else {
#pragma unroll
      for (int i = 0; i < kV; ++i) e[i] = p[i];
    }
  }
  __device__ __forceinline__ void store(T* p) const {
    if constexpr (kVector) {
      *reinterpret_cast<uint4*>(p) = *reinterpret_cast<const uint4*>(e);
    } else {
#pragma unroll
      for (int i = 0; i < kV; ++i) p[i] = e[i];
    }
  }
};

}  // namespace fp8kit::ops::elements
