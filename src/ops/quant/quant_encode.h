// The element step of every FP8 quantization op: load a 16/32-bit float, clamp, round to e4m3.
// Branch-free forms that GCC/Clang auto-vectorize; each is bit-identical to the scalar definition
// it replaces (f16_to_float, fmaxf of fabsf, encode_fp8 after fminf/fmaxf), which
// tests/cpu/test_quant_encode.cpp checks on every 16-bit input and every fp8 rounding boundary.
#pragma once

#include "fp8kit/fp8.h"

namespace fp8kit::ops {

// Exact widening to float. The f16 form rebiases the exponent field (+112; +224 for inf/NaN, to
// reach 255). A subnormal f16 m * 2^-24 is first built as the normal float 2^-14 * (1 + m/1024)
// and then 2^-14 is subtracted, exactly; normals subtract 0. The subtraction is unconditional
// (no branch to vectorize around) and only sees normal floats, so denormals-are-zero modes do not
// affect it. NaN payloads come out quieted.
FP8KIT_HOST_DEVICE float load_float(float x) { return x; }
FP8KIT_HOST_DEVICE float load_float(BFloat16 x) { return bf16_to_float(x); }
FP8KIT_HOST_DEVICE float load_float(Float16 x) {
  const uint32_t sign = uint32_t(x.bits & 0x8000u) << 16;
  const uint32_t mag = x.bits & 0x7fffu;
  const uint32_t is_subnormal = mag < 0x0400u ? 1u : 0u;
  const uint32_t rebias = (mag >= 0x7c00u ? 224u : 112u + is_subnormal) << 23;
  const float offset = bits_to_float(is_subnormal != 0 ? 0x38800000u : 0u);  // 2^-14 or 0
  return bits_to_float(sign | float_to_bits(bits_to_float((mag << 13) + rebias) - offset));
}

// |x| as ordered integer bits, and the bits that stand for "ignore" (NaN) in an fmaxf reduction:
// for non-NaN magnitudes the integer order equals the float order, so an integer max of
// (NaN ? 0 : |x| bits) equals fmaxf(0, fabsf(x_0), fabsf(x_1), ...) and vectorizes without
// any floating-point compare semantics to preserve.
FP8KIT_HOST_DEVICE uint32_t abs_bits(float x) {
  const uint32_t a = float_to_bits(x) & 0x7fffffffu;
  return a > 0x7f800000u ? 0u : a;
}
FP8KIT_HOST_DEVICE uint32_t abs_bits(BFloat16 x) {
  const uint32_t a = x.bits & 0x7fffu;
  return a > 0x7f80u ? 0u : a;
}
FP8KIT_HOST_DEVICE uint32_t abs_bits(Float16 x) {
  const uint32_t a = x.bits & 0x7fffu;
  return a > 0x7c00u ? 0u : a;
}
// The float value of a maximum of abs_bits over elements of type T.
FP8KIT_HOST_DEVICE float abs_bits_to_float(uint32_t a, float) { return bits_to_float(a); }
FP8KIT_HOST_DEVICE float abs_bits_to_float(uint32_t a, BFloat16) { return bf16_to_float(BFloat16{uint16_t(a)}); }
FP8KIT_HOST_DEVICE float abs_bits_to_float(uint32_t a, Float16) { return f16_to_float(Float16{uint16_t(a)}); }

// cvt(clamp(v)) of the spec: encode_fp8<F>(fmaxf(-max, fminf(v, max)), kSatFinite), for a positive
// finite max no larger than F's largest value (448 e4m3fn, 224 or 240 e4m3fnuz). NaN gives +max,
// +-inf and overflow +-max.
//
// The clamp is an integer min on the magnitude bits (NaN and inf order above every finite
// value), so no float compare is left for the compiler to turn into a branch. The rounding is
// one fp32 addition: with e = max(exponent of |v|, smallest normal exponent), |v| + 2^(e + 20)
// rounds |v| to nearest even on the fp8 grid of its binade (subnormals: the grid of the smallest
// normal binade), and the low bits of the sum count grid steps. Adding 8 steps per binade above
// the smallest gives the code; subnormal codes run on into the first normal code, so there is no
// case split. Checked against encode_fp8 on every float (tests/cpu/test_quant_encode.cpp samples
// it; the exhaustive run is in its header comment).
template <typename F>
FP8KIT_HOST_DEVICE uint8_t quantize_fp8(float v, float max) {
  static_assert(F::kManBits == 3 && !F::kHasInf, "e4m3 formats only");
  // Magnitudes fit in int32, and signed compares are what plain SSE2 has.
  constexpr int32_t kMinNormalBiasedExp = 127 + 1 - F::kBias;
  const uint32_t u = float_to_bits(v);
  const int32_t max_bits = int32_t(float_to_bits(max));
  int32_t a = int32_t(u & 0x7fffffffu);
  int32_t sign = a > 0x7f800000 ? 0 : int32_t((u >> 24) & 0x80u);  // NaN clamps to +max
  a = a < max_bits ? a : max_bits;
  const int32_t biased_exp = a >> 23;
  const int32_t e = biased_exp > kMinNormalBiasedExp ? biased_exp : kMinNormalBiasedExp;
  const int32_t magic = (e + (23 - F::kManBits)) << 23;
  const int32_t steps = int32_t(float_to_bits(bits_to_float(uint32_t(a)) + bits_to_float(uint32_t(magic)))) - magic;
  const int32_t code = steps + ((e - kMinNormalBiasedExp) << F::kManBits);
  if (F::kFnuz) sign = code == 0 ? 0 : sign;  // fnuz has no negative zero
  return uint8_t(sign | code);
}

}  // namespace fp8kit::ops
