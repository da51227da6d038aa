// FP8 cache bytes as f16 / bf16 bits, exactly (every e4m3fn and e5m2 value is an f16 and a bf16
// value): the integer form the tensor-core attention kernel uses where the GPU has no FP8
// conversions (sm_80), shared with its CPU test (tests/cpu/test_attention_plan.cpp checks all 256
// codes of both formats against fp8.h). NaN codes give a quiet NaN of the byte's sign, e5m2
// infinities infinities.
#pragma once

#include <cstdint>

#include "fp8kit/host_device.h"

namespace fp8kit::ops::fp8_widen {

// e4m3fn s.eeee.mmm (bias 7) into a 16-bit float of `exp_bits` exponent bits (f16: 5, bias 15,
// 10 mantissa bits; bf16: 8, bias 127, 7 mantissa bits). Subnormal codes m * 2^-9 are normal in both.
template <int kExpBits>
FP8KIT_HOST_DEVICE uint16_t e4m3_to_16(uint32_t byte) {
  constexpr int kMan = 15 - kExpBits, kBias = (1 << (kExpBits - 1)) - 1;
  const uint32_t sign = (byte & 0x80u) << 8, e = (byte >> 3) & 0xfu, m = byte & 7u;
  if ((byte & 0x7fu) == 0x7fu) return uint16_t(sign | (((1u << kExpBits) - 1u) << kMan) | (1u << (kMan - 1)));
  if (e != 0) return uint16_t(sign | ((e + kBias - 7) << kMan) | (m << (kMan - 3)));
  if (m == 0) return uint16_t(sign);
  // m * 2^-9 = 2^(k - 9) * (m / 2^k) with 2^k <= m < 2^(k + 1).
  const uint32_t k = m >= 4 ? 2u : (m >= 2 ? 1u : 0u);
  return uint16_t(sign | ((k - 9 + kBias) << kMan) | (((m << (kMan - k)) & ((1u << kMan) - 1u))));
}

// e5m2 s.eeeee.mm (bias 15): the top byte of an f16; into bf16 with its specials.
FP8KIT_HOST_DEVICE uint16_t e5m2_to_f16(uint32_t byte) { return uint16_t((byte & 0xffu) << 8); }
FP8KIT_HOST_DEVICE uint16_t e5m2_to_bf16(uint32_t byte) {
  const uint32_t sign = (byte & 0x80u) << 8, e = (byte >> 2) & 0x1fu, m = byte & 3u;
  if (e == 31) return uint16_t(sign | 0x7f80u | (m != 0 ? 0x40u : 0u));
  if (e != 0) return uint16_t(sign | ((e + 112) << 7) | (m << 5));
  if (m == 0) return uint16_t(sign);
  const uint32_t k = m >= 2 ? 1u : 0u;  // m * 2^-16 = 2^(k - 16) * (m / 2^k)
  return uint16_t(sign | ((k - 16 + 127) << 7) | ((m << (7 - k)) & 0x7fu));
}

}  // namespace fp8kit::ops::fp8_widen
