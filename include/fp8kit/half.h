// 16-bit floats: IEEE binary16 (f16) and bfloat16, as storage types with exact conversions.
// float -> 16 bit rounds to nearest, ties to even (what torch's .to(float16/bfloat16) does);
// 16 bit -> float is exact. Shared by host code and CUDA kernels.
#pragma once

#include "fp8kit/host_device.h"

namespace fp8kit {

struct Float16 {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};
static_assert(sizeof(Float16) == 2 && sizeof(BFloat16) == 2);

FP8KIT_HOST_DEVICE float bf16_to_float(BFloat16 h) { return bits_to_float(uint32_t(h.bits) << 16); }

FP8KIT_HOST_DEVICE BFloat16 float_to_bf16(float f) {
  uint32_t u = float_to_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return BFloat16{uint16_t(0x7fc0u | ((u >> 16) & 0x8000u))};  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return BFloat16{uint16_t(u >> 16)};
}

FP8KIT_HOST_DEVICE float f16_to_float(Float16 h) {
  const uint32_t sign = uint32_t(h.bits & 0x8000u) << 16;
  const uint32_t exp = (h.bits >> 10) & 0x1fu;
  const uint32_t man = h.bits & 0x3ffu;
  if (exp == 0x1f) return bits_to_float(sign | 0x7f800000u | (man << 13));  // inf / NaN
  if (exp == 0) {
    // zero or subnormal: man * 2^-24, exact in float
    const float magnitude = float(man) * bits_to_float(0x33800000u);  // 2^-24
    return bits_to_float(sign | float_to_bits(magnitude));
  }
  return bits_to_float(sign | ((exp + 112u) << 23) | (man << 13));
}

FP8KIT_HOST_DEVICE Float16 float_to_f16(float f) {
  const uint32_t u = float_to_bits(f);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return Float16{uint16_t(sign | 0x7e00u)};  // NaN
  if (a >= 0x477ff000u) return Float16{uint16_t(sign | 0x7c00u)};  // rounds to >= 65520: inf
  const int exp = int(a >> 23) - 127;
  if (exp >= -14) {  // normal in f16
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
    r >>= 13;
    return Float16{uint16_t(sign | (r - (112u << 10)))};
  }
  // subnormal in f16: units of 2^-24
  if (exp < -25) return Float16{sign};  // below half the smallest subnormal (or float subnormal)
  const uint32_t sig = (a & 0x7fffffu) | 0x800000u;
  const int shift = 23 - 24 - exp;  // sig * 2^(exp-23) / 2^-24 = sig >> (-1 - exp)
  uint32_t q = sig >> shift;
  const uint32_t rem = sig & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  q += (rem > half || (rem == half && (q & 1u))) ? 1u : 0u;
  return Float16{uint16_t(sign | q)};
}

// The same conversions for code templated on the element type T (float, Float16 or BFloat16).
FP8KIT_HOST_DEVICE float to_float(float v) { return v; }
FP8KIT_HOST_DEVICE float to_float(Float16 v) { return f16_to_float(v); }
FP8KIT_HOST_DEVICE float to_float(BFloat16 v) { return bf16_to_float(v); }

template <typename T>
FP8KIT_HOST_DEVICE T from_float(float f);
template <>
FP8KIT_HOST_DEVICE float from_float<float>(float f) {
  return f;
}
template <>
FP8KIT_HOST_DEVICE Float16 from_float<Float16>(float f) {
  return float_to_f16(f);
}
template <>
FP8KIT_HOST_DEVICE BFloat16 from_float<BFloat16>(float f) {
  return float_to_bf16(f);
}

}  // namespace fp8kit
