// The element step of every FP8 quantization op: load a 16/32-bit float, clamp, round to e4m3.
// Branch-free forms that GCC/Clang auto-vectorize; each is bit-identical to the scalar definition
// it replaces (f16_to_float, fmaxf of fabsf, encode_fp8 after fminf/fmaxf), which
// tests/cpu/test_quant_encode.cpp checks on every 16-bit input and every fp8 rounding boundary.
#pragma once

#include <cmath>

#include "fp8kit/fp8.h"
#include "ops/float_rn.h"

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

// x / s, correctly rounded, for many x and one s with its reciprocal z = 1.0f / s (correctly
// rounded) computed once: q = x * z is within 1.5 ulp of x / s; one correction with the exact
// residual q * s - x (one FMA) makes it faithful; a second is Markstein's theorem (z within half
// an ulp of 1/s, q within one ulp of x/s: fl(q + (x - q s) z) = fl(x / s); see Brisebarre, Muller
// and Raina, "Accelerating correctly rounded floating-point division when the divisor is known in
// advance", IEEE TC 2004). Five floating-point operations instead of a division's ~13 issue
// slots on the GPU (reciprocal, FCHK and its branch each time). The theorem needs no underflow or
// overflow on the way: divisor_is_regular() checks that for a whole run; where it fails, divide.
// The residual is formed as q * s - x and subtracted so that x = -0 gives -0.
// tests/cpu/test_quant_encode.cpp compares it with x / s on dense samples.
FP8KIT_HOST_DEVICE float divide_with_reciprocal(float x, float s, float z) {
  float q = mul_rn(x, z);
  float r = fma_rn(q, s, -x);
  q = fma_rn(-r, z, q);
  r = fma_rn(q, s, -x);
  return fma_rn(-r, z, q);
}

// Whether divide_with_reciprocal(x, s, z) quantizes as x / s does for every x with |x| <= amax
// (NaN included; an infinite amax fails): s and z within 2^+-60 and |x / s| below 2^100 keep
// every intermediate normal wherever the quotient can reach a nonzero e4m3 code (|x / s| >=
// 2^-12), so the quotients are equal there; smaller ones may lose low bits to underflow but stay
// below 2^-11 with the sign of x / s, which every e4m3 format rounds to the zero of that sign.
FP8KIT_HOST_DEVICE bool divisor_is_regular(float s, float z, float amax) {
  return s >= 0x1p-60f && s <= 0x1p60f && mul_rn(amax, z) <= 0x1p100f;
}

// Four quantize_fp8 results packed into a word, element 0 in the low byte: the form the CUDA
// kernels store. On GPUs with FP8 conversions (sm_89 and later) the integer path above would
// saturate the 32-bit integer pipes (~14 operations per element, 64 lanes per clock per SM: less
// than the 1.4 G elements/ms a bf16 stream needs), so device code there clamps with the spec's
// own fmaxf(-max, fminf(v, max)) (NaN gives +max, as above) and rounds with the hardware's
// cvt.rn.satfinite.e4m3x2.f32, round to nearest even like the integer path. e4m3fnuz is the
// e4m3fn code of 2v (the same bits at half the value; exact) with 0x80 (-0) sent to 0.
// tests/gpu/test_quant_encode_cuda.cpp checks both against this host path on every rounding
// boundary of every binade.
//
// kTopMax: the caller has checked max_is_top<F>(max), i.e. the clamp bound is what cvt saturates
// to anyway (448 e4m3fn; 224 fnuz, doubled to 448). Then satfinite already sends v <= -max and
// -inf to -max, and only fminf(v, max) is left to send NaN to +max: one instruction less per
// element on the device; the host ignores it.
template <typename F>
FP8KIT_HOST_DEVICE bool max_is_top(float max) {
  return (F::kFnuz ? max * 2.0f : max) == 448.0f;
}

template <typename F, bool kTopMax = false>
FP8KIT_HOST_DEVICE uint32_t quantize_fp8x4(float v0, float v1, float v2, float v3, float max) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  static_assert(F::kManBits == 3 && !F::kHasInf, "e4m3 formats only");
  // 2v of an fnuz max above 224 would pass e4m3fn's 448: such a max takes the integer path.
  if (!F::kFnuz || max <= 224.0f) {
    auto clamp = [max](float v) {
      const float c = kTopMax ? fminf(v, max) : fmaxf(-max, fminf(v, max));
      return F::kFnuz ? __fmul_rn(c, 2.0f) : c;
    };
    uint16_t lo, hi;  // cvt puts its first operand in the high byte
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(lo) : "f"(clamp(v1)), "f"(clamp(v0)));
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(hi) : "f"(clamp(v3)), "f"(clamp(v2)));
    uint32_t word = uint32_t(lo) | (uint32_t(hi) << 16);
    if (F::kFnuz) word &= ~__vcmpeq4(word, 0x80808080u);  // no negative zero in fnuz
    return word;
  }
#endif
  return uint32_t(quantize_fp8<F>(v0, max)) | (uint32_t(quantize_fp8<F>(v1, max)) << 8) |
         (uint32_t(quantize_fp8<F>(v2, max)) << 16) | (uint32_t(quantize_fp8<F>(v3, max)) << 24);
}

}  // namespace fp8kit::ops
