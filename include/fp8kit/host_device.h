// FP8KIT_HOST_DEVICE marks small numeric helpers that host code and CUDA kernels share, so the
// CPU reference and the kernels use one definition of every number format.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define FP8KIT_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define FP8KIT_HOST_DEVICE inline
#endif

namespace fp8kit {

FP8KIT_HOST_DEVICE uint32_t float_to_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof(u));
  return u;
}

FP8KIT_HOST_DEVICE float bits_to_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof(f));
  return f;
}

}  // namespace fp8kit
