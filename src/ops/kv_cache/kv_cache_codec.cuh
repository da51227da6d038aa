// The element conversions of the paged FP8 KV cache on the device: the store's
// encode_satfinite(x / s) (bit-exact with kv_cache_encode of kv_cache_ref.cpp) and the read's
// decode of a cache byte to f32 / 16-bit (exact). Used by the store (kv_cache_cuda.cu) and the
// attention kernels. Tests: tests/gpu/test_kv_cache_cuda.cpp (every rounding boundary).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "fp8kit/fp8.h"

namespace fp8kit::ops::kv_codec {

// The stored byte of y = x / s (the quotient already formed): e4m3fn or e5m2, round to nearest
// even, |y| past the largest finite value and +-inf saturate, NaN -> 0x7F (both formats).
// sm_89+: the clamp to +-max then the hardware's cvt.rn.satfinite (clamping first makes the
// result independent of how cvt treats values past max; it only ever sees finite inputs in range
// or NaN, which is replaced). Before sm_89: fp8.h's encode_fp8.
template <bool kE5M2>
__device__ __forceinline__ uint32_t encode_pair(float y0, float y1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  constexpr float kMax = kE5M2 ? 57344.0f : 448.0f;
  const float c0 = fmaxf(-kMax, fminf(y0, kMax)), c1 = fmaxf(-kMax, fminf(y1, kMax));
  uint16_t pair;  // cvt puts its first operand in the high byte
  if constexpr (kE5M2) {
    asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(pair) : "f"(c1), "f"(c0));
  } else {
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(pair) : "f"(c1), "f"(c0));
  }
  uint32_t w = pair;
  if (isnan(y0)) w = (w & 0xff00u) | 0x7fu;
  if (isnan(y1)) w = (w & 0x00ffu) | 0x7f00u;
  return w;
#else
  if constexpr (kE5M2) {
    return uint32_t(float_to_e5m2_bits(y0, Saturation::kSatFinite)) |
           (uint32_t(float_to_e5m2_bits(y1, Saturation::kSatFinite)) << 8);
  } else {
    return uint32_t(float_to_e4m3fn_bits(y0, Saturation::kSatFinite)) |
           (uint32_t(float_to_e4m3fn_bits(y1, Saturation::kSatFinite)) << 8);
  }
#endif
}

// Four bytes of x_i / s (IEEE division, as vLLM's x / scale), element 0 in the low byte.
template <bool kE5M2>
__device__ __forceinline__ uint32_t encode4(float x0, float x1, float x2, float x3, float s) {
  return encode_pair<kE5M2>(__fdiv_rn(x0, s), __fdiv_rn(x1, s)) |
         (encode_pair<kE5M2>(__fdiv_rn(x2, s), __fdiv_rn(x3, s)) << 16);
}

// The FP8 value of a cache byte (the low byte of `byte`), exact in f32: NaN codes give NaN, e5m2
// infinities inf, as fp8.h's decoders. e4m3fn: the byte's exponent and mantissa placed at the
// bottom of an f32 (a normal or subnormal f32 2^-120 times the value) times 2^120, exact for
// every code; e5m2 is the top byte of an f16.
__device__ __forceinline__ float decode_e4m3(uint32_t byte) {
  const uint32_t b = byte & 0xffu;
  if ((b & 0x7fu) == 0x7fu) return __uint_as_float(0x7fc00000u | ((b & 0x80u) << 24));
  return __fmul_rn(__uint_as_float(((b & 0x80u) << 24) | ((b & 0x7fu) << 20)), 0x1p120f);
}
__device__ __forceinline__ float decode_e5m2(uint32_t byte) {
  return __half2float(__ushort_as_half(uint16_t((byte & 0xffu) << 8)));
}
__device__ __forceinline__ float decode(uint32_t byte, bool e5m2) { return e5m2 ? decode_e5m2(byte) : decode_e4m3(byte); }

}  // namespace fp8kit::ops::kv_codec
