// Device math of the gated activations (activation_ref.cpp's formulas), shared by act_and_mul_kernel
// (activation_cuda.cu) and the fused activation + quantization of the MoE layer
// (ops/moe/moe_act_quant_cuda.cu), so that both produce the same bits.
//
// The exact path: every f32 operation is written with an explicit _rn intrinsic (no FMA
// contraction), in the reference's order. The transcendental is the one place where the math
// library matters: glibc's expf / erff are (nearly) correctly rounded while CUDA's expf / erff
// allow 2 ulp, so the exact path evaluates exp and erf in double and rounds to float: the
// correctly rounded f32 value except within ~2^-29 of a midpoint.
//
// SiLU's fast path, for 16-bit T: the exact path costs ~150 instructions an element, which made
// the MoE intermediate compute-bound (a 32768 x 14336 activation ran at 1.3 TB/s). The activation
// is rounded to T before it is used, so only that rounding has to agree with the exact path. The
// fast path evaluates the same formula with CUDA's expf (at most 2 ulp) and an approximate
// reciprocal (the quotient within 2 ulp):
// fl(1 + e) is then within 3.5 ulp of the exact path's, and the quotient within 10 ulp, at most
// 20 steps of the f32 bit pattern across a binade boundary. Where the f32 quotient lies more than
// kFastMargin (32) steps from the nearest rounding midpoint of T, T holds it as a normal number and
// every operand is finite and in range, every value within that error rounds to the same T, which
// is then the exact path's T; the product with `up` is one rounding either way (done here by the
// hardware's round-to-nearest-even conversion, the same as from_float for finite values). A zero
// gate gives a zero quotient of its sign on both paths (g * rcp(2) is exact), so zeros stay on
// the fast path: the sorted MoE path's padding rows are zeros, and with them on the exact path
// its activation ran at ~120 instructions an element (ncu, Mixtral-8x7B M = 64, three quarters of
// the rows padding). Other elements take the exact path: about 0.1% of bf16 gates, 0.8% of f16
// gates (every one of the 65,536 gates of each type is checked by
// tests/gpu/test_moe_act_quant_cuda.cpp). GELU keeps the exact path: 1 + erf cancels for negative
// x, where a 2-ulp erf is far from enough.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "fp8kit/dtype.h"
#include "fp8kit/half.h"

namespace fp8kit::ops {

// silu_f32 of activation_ref.cpp: x / (1 + exp(-x)). The exact functions are calls, not inlined:
// they are long, and the kernels would carry a copy for every element of a step.
static __device__ __noinline__ float silu_f32(float x) {
  const float e = float(exp(-double(x)));
  return __fdiv_rn(x, __fadd_rn(1.0f, e));
}

// gelu_f32 of activation_ref.cpp: x * 0.5f * (1.0f + erf(x * float(M_SQRT1_2))), left to right.
static __device__ __noinline__ float gelu_f32(float x) {
  constexpr float kSqrt1_2 = 0.70710678118654752440f;  // float(M_SQRT1_2)
  const float erf_x = float(erf(double(__fmul_rn(x, kSqrt1_2))));
  return __fmul_rn(__fmul_rn(x, 0.5f), __fadd_rn(1.0f, erf_x));
}

// The exact path of one element: T(T(act(gate)) * up), the product exact for 16-bit T (one
// rounding, as T * T).
template <typename T, bool kSilu>
__device__ __forceinline__ T act_and_mul_exact(T gate, T up) {
  const float g = to_float(gate);
  const float act = to_float(from_float<T>(kSilu ? silu_f32(g) : gelu_f32(g)));
  return from_float<T>(__fmul_rn(act, to_float(up)));
}

constexpr uint32_t kFastMargin = 32;

// Two floats rounded to nearest-even into a packed pair of T (lo in the low half).
template <typename T>
__device__ __forceinline__ uint32_t pack_rn(float lo, float hi) {
  uint32_t r;
  if constexpr (DTypeOf<T>::value == DType::kBF16) {
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  } else {
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  }
  return r;
}

// The two values of a packed pair of T, widened exactly (bf16 by a shift, f16 by the hardware).
template <typename T>
__device__ __forceinline__ void unpack(uint32_t w, float& lo, float& hi) {
  if constexpr (DTypeOf<T>::value == DType::kBF16) {
    lo = __uint_as_float(w << 16);
    hi = __uint_as_float(w & 0xffff0000u);
  } else {
    asm("{\n .reg .b16 l, h;\n mov.b32 {l, h}, %2;\n cvt.f32.f16 %0, l;\n cvt.f32.f16 %1, h;\n}"
        : "=f"(lo), "=f"(hi)
        : "r"(w));
  }
}

// x / d for d >= 1 within 2 ulp: the approximate reciprocal (1 ulp) times x.
__device__ __forceinline__ float divide_approx(float x, float d) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(d));
  return x * r;
}

// Whether the fast SiLU quotient q of gate g (with factor up) gives the exact path's T: g and up
// in range, q zero (g zero) or a normal T more than kFastMargin bit steps from a rounding midpoint
// of T.
template <typename T>
__device__ __forceinline__ bool silu_fast_ok(float g, float q, float up) {
  const uint32_t bits = __float_as_uint(q) & 0x7fffffffu;
  const float ag = fabsf(g);
  const bool operands = g > -80.0f && (ag >= 0x1p-100f || ag == 0.0f) && ag <= 0x1p100f && fabsf(up) <= 0x1.fffffep127f;
  if constexpr (DTypeOf<T>::value == DType::kBF16) {
    // 16 bits dropped, midpoint 0x8000: ok when (low - (0x8000 - margin)) mod 2^16 > 2 margin.
    return operands && ((bits - (0x8000u - kFastMargin)) & 0xffffu) > 2 * kFastMargin;
  } else {
    // f16: 13 bits dropped, midpoint 0x1000; zero, or normal results from 2^-14 to below 2^15.
    const bool normal = bits == 0u || (bits >= 0x38800000u && bits < 0x47000000u);
    return operands && normal && ((bits - (0x1000u - kFastMargin)) & 0x1fffu) > 2 * kFastMargin;
  }
}

// act_and_mul of a packed pair of 16-bit T (gate's pair and up's pair -> the output pair).
template <typename T, bool kSilu>
__device__ __forceinline__ uint32_t act_and_mul_x2(uint32_t gate2, uint32_t up2) {
  static_assert(sizeof(T) == 2, "packed pairs of 16-bit values");
  if constexpr (kSilu) {
    float g0, g1, u0, u1, a0, a1;
    unpack<T>(gate2, g0, g1);
    unpack<T>(up2, u0, u1);
    const float q0 = divide_approx(g0, 1.0f + expf(-g0)), q1 = divide_approx(g1, 1.0f + expf(-g1));
    unpack<T>(pack_rn<T>(q0, q1), a0, a1);
    uint32_t y2 = pack_rn<T>(a0 * u0, a1 * u1);
    if (!silu_fast_ok<T>(g0, q0, u0)) {
      y2 = (y2 & 0xffff0000u) | act_and_mul_exact<T, true>(T{uint16_t(gate2)}, T{uint16_t(up2)}).bits;
    }
    if (!silu_fast_ok<T>(g1, q1, u1)) {
      y2 = (y2 & 0xffffu) | (uint32_t(act_and_mul_exact<T, true>(T{uint16_t(gate2 >> 16)}, T{uint16_t(up2 >> 16)}).bits) << 16);
    }
    return y2;
  } else {
    return uint32_t(act_and_mul_exact<T, false>(T{uint16_t(gate2)}, T{uint16_t(up2)}).bits) |
           (uint32_t(act_and_mul_exact<T, false>(T{uint16_t(gate2 >> 16)}, T{uint16_t(up2 >> 16)}).bits) << 16);
  }
}

}  // namespace fp8kit::ops
