// The one definition of every 8-bit float format fp8kit speaks, shared by the CPU reference and
// the CUDA kernels (FP8KIT_HOST_DEVICE):
//   e4m3fn    (OCP E4M3, torch.float8_e4m3fn):   bias 7,  max 448,   NaN S.1111.111, no inf, has -0
//   e4m3fnuz  (torch.float8_e4m3fnuz, MI300):    bias 8,  max 240,   NaN 0x80,       no inf, no -0
//   e5m2      (torch.float8_e5m2):               bias 15, max 57344, IEEE inf/NaN,   has -0
//   e5m2fnuz  (torch.float8_e5m2fnuz):           bias 16, max 57344, NaN 0x80,       no inf, no -0
//   ue8m0     (float8_e8m0fnu, scale format):    2^(code-127), unsigned, 0xFF = NaN
// Encoding rounds to nearest, ties to even. kSatFinite clamps overflow (and +-inf) to +-max;
// kNoSat turns overflow into inf (e5m2) or NaN (the others). A NaN input encodes as 0x7F
// (e4m3fn, e5m2: the code cuda_fp8.h's __nv_cvt_float_to_fp8 returns) or 0x80 (fnuz formats).
// Tests check every code and every bf16/f16 input against cuda_fp8.h and ml_dtypes.
#pragma once

#include "fp8kit/half.h"

namespace fp8kit {

struct Float8E4M3FN {
  uint8_t bits;
};
struct Float8E4M3FNUZ {
  uint8_t bits;
};
struct Float8E5M2 {
  uint8_t bits;
};
struct Float8E5M2FNUZ {
  uint8_t bits;
};
struct Float8UE8M0 {
  uint8_t bits;
};

enum class Saturation { kSatFinite, kNoSat };

// Format traits. kMaxCode is the largest finite magnitude code.
struct E4M3FNFormat {
  static constexpr int kManBits = 3, kBias = 7;
  static constexpr uint32_t kMaxCode = 0x7e, kInfCode = 0, kNaNCode = 0x7f;
  static constexpr bool kHasInf = false, kFnuz = false;
  static constexpr float kMax = 448.0f;
};
struct E4M3FNUZFormat {
  static constexpr int kManBits = 3, kBias = 8;
  static constexpr uint32_t kMaxCode = 0x7f, kInfCode = 0, kNaNCode = 0x80;
  static constexpr bool kHasInf = false, kFnuz = true;
  static constexpr float kMax = 240.0f;
};
struct E5M2Format {
  static constexpr int kManBits = 2, kBias = 15;
  static constexpr uint32_t kMaxCode = 0x7b, kInfCode = 0x7c, kNaNCode = 0x7f;
  static constexpr bool kHasInf = true, kFnuz = false;
  static constexpr float kMax = 57344.0f;
};
struct E5M2FNUZFormat {
  static constexpr int kManBits = 2, kBias = 16;
  static constexpr uint32_t kMaxCode = 0x7f, kInfCode = 0, kNaNCode = 0x80;
  static constexpr bool kHasInf = false, kFnuz = true;
  static constexpr float kMax = 57344.0f;
};

// Encodes a float into the 8-bit format F, round to nearest even.
template <typename F>
FP8KIT_HOST_DEVICE uint8_t encode_fp8(float x, Saturation saturation) {
  const uint32_t u = float_to_bits(x);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint8_t(F::kNaNCode);
  constexpr int kMinNormalExp = 1 - F::kBias;
  const int exp = int(a >> 23) - 127;
  uint32_t code;
  if (a == 0x7f800000u) {
    code = 0xffu;  // inf: handled as overflow below
  } else if (exp >= kMinNormalExp) {
    // Normal in the target: round the 23-bit mantissa to kManBits bits, then rebias.
    constexpr int kShift = 23 - F::kManBits;
    uint32_t r = a + ((1u << (kShift - 1)) - 1u) + ((a >> kShift) & 1u);
    r >>= kShift;
    code = r - (uint32_t(127 - F::kBias) << F::kManBits);
  } else {
    // Subnormal in the target: count units of 2^(kMinNormalExp - kManBits).
    const int shift = 23 + (kMinNormalExp - F::kManBits) - exp;
    if (shift >= 25) {
      code = 0;  // below half the smallest subnormal (also float zeros and subnormals)
    } else {
      const uint32_t sig = (a & 0x7fffffu) | 0x800000u;
      uint32_t q = sig >> shift;
      const uint32_t rem = sig & ((1u << shift) - 1u);
      const uint32_t half = 1u << (shift - 1);
      q += (rem > half || (rem == half && (q & 1u))) ? 1u : 0u;
      code = q;
    }
  }
  if (code > F::kMaxCode) {
    if (saturation == Saturation::kSatFinite) {
      code = F::kMaxCode;
    } else if (F::kHasInf) {
      code = F::kInfCode;
    } else {
      return uint8_t(F::kFnuz ? F::kNaNCode : (sign | F::kNaNCode));
    }
  }
  if (F::kFnuz && code == 0) return 0;  // no negative zero
  return uint8_t(sign | code);
}

// Decodes an 8-bit code of format F to float (exact).
template <typename F>
FP8KIT_HOST_DEVICE float decode_fp8(uint8_t c) {
  const uint32_t sign = uint32_t(c & 0x80u) << 24;
  const uint32_t mag = c & 0x7fu;
  if (F::kFnuz) {
    if (c == 0x80) return bits_to_float(0x7fc00000u);
  } else if (F::kHasInf) {
    if (mag == F::kInfCode) return bits_to_float(sign | 0x7f800000u);
    if (mag > F::kInfCode) return bits_to_float(0x7fc00000u | sign);
  } else if (mag == F::kNaNCode) {
    return bits_to_float(0x7fc00000u | sign);
  }
  const uint32_t exp = mag >> F::kManBits;
  const uint32_t man = mag & ((1u << F::kManBits) - 1u);
  if (exp == 0) {
    // man * 2^(1 - bias - kManBits), exact in float
    const float unit = bits_to_float(uint32_t(127 + 1 - F::kBias - F::kManBits) << 23);
    return bits_to_float(sign | float_to_bits(float(man) * unit));
  }
  return bits_to_float(sign | ((exp + uint32_t(127 - F::kBias)) << 23) | (man << (23 - F::kManBits)));
}

FP8KIT_HOST_DEVICE uint8_t float_to_e4m3fn_bits(float x, Saturation s = Saturation::kSatFinite) {
  return encode_fp8<E4M3FNFormat>(x, s);
}
FP8KIT_HOST_DEVICE float e4m3fn_bits_to_float(uint8_t c) { return decode_fp8<E4M3FNFormat>(c); }
FP8KIT_HOST_DEVICE uint8_t float_to_e4m3fnuz_bits(float x, Saturation s = Saturation::kSatFinite) {
  return encode_fp8<E4M3FNUZFormat>(x, s);
}
FP8KIT_HOST_DEVICE float e4m3fnuz_bits_to_float(uint8_t c) { return decode_fp8<E4M3FNUZFormat>(c); }
FP8KIT_HOST_DEVICE uint8_t float_to_e5m2_bits(float x, Saturation s = Saturation::kSatFinite) {
  return encode_fp8<E5M2Format>(x, s);
}
FP8KIT_HOST_DEVICE float e5m2_bits_to_float(uint8_t c) { return decode_fp8<E5M2Format>(c); }

// UE8M0: a power of two 2^(code - 127); code 0xFF is NaN. The sign of the input is ignored.
// kTowardZero takes floor(log2|x|), kUpward ceil(log2|x|) (DeepSeek's scale rule
// s = 2^ceil(log2(amax / 448))). Zero and values below 2^-127 clamp to code 0 (2^-127).
enum class E8M0Rounding { kTowardZero, kUpward };

FP8KIT_HOST_DEVICE uint8_t float_to_ue8m0_bits(float x, E8M0Rounding rounding,
                                                Saturation saturation = Saturation::kSatFinite) {
  const uint32_t a = float_to_bits(x) & 0x7fffffffu;
  if (a > 0x7f800000u) return 0xff;
  if (a == 0x7f800000u) return saturation == Saturation::kSatFinite ? 0xfe : 0xff;
  uint32_t code;
  const uint32_t biased_exp = a >> 23;
  if (biased_exp == 0) {  // zero or float subnormal: below 2^-126
    code = (rounding == E8M0Rounding::kUpward && a > 0x00400000u) ? 1u : 0u;
  } else {
    code = biased_exp + ((rounding == E8M0Rounding::kUpward && (a & 0x7fffffu) != 0) ? 1u : 0u);
  }
  if (code == 0xff) code = saturation == Saturation::kSatFinite ? 0xfeu : 0xffu;
  return uint8_t(code);
}

FP8KIT_HOST_DEVICE float ue8m0_bits_to_float(uint8_t c) {
  if (c == 0xff) return bits_to_float(0x7fc00000u);
  if (c == 0) return bits_to_float(0x00400000u);  // 2^-127, a float subnormal
  return bits_to_float(uint32_t(c) << 23);
}

}  // namespace fp8kit
