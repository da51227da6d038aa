// The AVX2 silu_and_mul of the CPU backend (activation_cpu.h): 8 outputs a step,
//   act = T(x / (1 + e)), e = exp(-x) correctly rounded to f32, out = T(act * up),
// with the reference's f32 operations and roundings (bf16 round to nearest even, NaN to the
// quiet NaN of its sign; f16 by VCVTPS2PH, NaNs made canonical as float_to_f16 makes them).
// exp in double: x = n ln2 + r (Cody-Waite, |r| <= 0.35), exp(r) by its Taylor series to degree
// 13 (truncation < 5e-18), times 2^n in two halves (each a normal double): the double is within
// ~3e-16 of exp(x), so its one rounding to f32 is the correct one except where exp(x) lies that
// close to an f32 midpoint. Tails run through a zero-padded vector step.
// Reference: activation_ref.cpp. Tests: tests/cpu/test_activation_cpu.cpp.
#include "ops/activation/activation_cpu.h"

#include "core/check.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "fp8kit/half.h"

#include "ops/avx2_target_begin.h"

#include "ops/avx2_elements.h"

namespace fp8kit::ops::cpu {
namespace {

// 2^e for 32-bit integers e in [-1022, 1023] as doubles.
inline __m256d pow2(__m128i e) {
  return _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_add_epi64(_mm256_cvtepi32_epi64(e), _mm256_set1_epi64x(1023)), 52));
}

inline __m256d exp_pd(__m256d x) {
  const __m256d inv_ln2 = _mm256_set1_pd(1.4426950408889634);
  const __m256d ln2_hi = _mm256_set1_pd(0.6931471803691238), ln2_lo = _mm256_set1_pd(1.9082149292705877e-10);
  // exp(100) overflows f32 and exp(-160) is below half its smallest subnormal: clamp there (NaN
  // lanes come out finite; the caller's x / (1 + e) is NaN for them anyway).
  x = _mm256_max_pd(_mm256_min_pd(x, _mm256_set1_pd(100.0)), _mm256_set1_pd(-160.0));
  const __m256d n = _mm256_round_pd(_mm256_mul_pd(x, inv_ln2), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256d r = _mm256_fnmadd_pd(n, ln2_hi, x);  // exact: n * ln2_hi has 32 significant bits
  r = _mm256_fnmadd_pd(n, ln2_lo, r);
  // Taylor coefficients 1/i!, i <= 13 (truncation below 5e-18 for |r| <= 0.35), by Estrin's
  // scheme: four FMA latencies deep instead of thirteen.
  static constexpr double kInvFactorial[14] = {1.0,           1.0,            1.0 / 2,         1.0 / 6,
                                               1.0 / 24,      1.0 / 120,      1.0 / 720,       1.0 / 5040,
                                               1.0 / 40320,   1.0 / 362880,   1.0 / 3628800,   1.0 / 39916800,
                                               1.0 / 479001600, 1.0 / 6227020800};
#define FP8KIT_C(i) _mm256_set1_pd(kInvFactorial[i])
  const __m256d r2 = _mm256_mul_pd(r, r), r4 = _mm256_mul_pd(r2, r2), r8 = _mm256_mul_pd(r4, r4);
  const __m256d q0 = _mm256_fmadd_pd(FP8KIT_C(1), r, FP8KIT_C(0)), q1 = _mm256_fmadd_pd(FP8KIT_C(3), r, FP8KIT_C(2));
  const __m256d q2 = _mm256_fmadd_pd(FP8KIT_C(5), r, FP8KIT_C(4)), q3 = _mm256_fmadd_pd(FP8KIT_C(7), r, FP8KIT_C(6));
  const __m256d q4 = _mm256_fmadd_pd(FP8KIT_C(9), r, FP8KIT_C(8)), q5 = _mm256_fmadd_pd(FP8KIT_C(11), r, FP8KIT_C(10));
  const __m256d q6 = _mm256_fmadd_pd(FP8KIT_C(13), r, FP8KIT_C(12));
  const __m256d s0 = _mm256_fmadd_pd(q1, r2, q0), s1 = _mm256_fmadd_pd(q3, r2, q2), s2 = _mm256_fmadd_pd(q5, r2, q4);
  const __m256d t0 = _mm256_fmadd_pd(s1, r4, s0), t1 = _mm256_fmadd_pd(q6, r4, s2);
  const __m256d p = _mm256_fmadd_pd(t1, r8, t0);
#undef FP8KIT_C
  const __m128i ni = _mm256_cvtpd_epi32(n);
  const __m128i n1 = _mm_srai_epi32(ni, 1), n2 = _mm_sub_epi32(ni, n1);
  return _mm256_mul_pd(_mm256_mul_pd(p, pow2(n1)), pow2(n2));
}

// exp(x) correctly rounded to f32, 8 lanes.
inline __m256 exp_ps(__m256 x) {
  const __m128 lo = _mm256_cvtpd_ps(exp_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(x))));
  const __m128 hi = _mm256_cvtpd_ps(exp_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(x, 1))));
  return _mm256_set_m128(hi, lo);
}

using avx2::load8;
using avx2::narrow8;
using avx2::widen8;

// 8 outputs from 8 gates and 8 ups.
template <typename T>
inline void silu8(const T* gate, const T* up, T* out) {
  const __m256 x = load8(gate), u = load8(up);
  const __m256 e = exp_ps(_mm256_xor_ps(x, _mm256_set1_ps(-0.0f)));
  const __m256 act = _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
  if constexpr (sizeof(T) == 4) {
    _mm256_storeu_ps(reinterpret_cast<float*>(out), _mm256_mul_ps(act, u));
  } else {
    // The product of two 16-bit values is exact in f32: one rounding to T, as T * T.
    const __m256 y = _mm256_mul_ps(widen8<T>(narrow8<T>(act)), u);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), narrow8<T>(y));
  }
}

template <typename T>
void silu_row(const T* x, T* out, int64_t d) {
  int64_t i = 0;
  for (; i + 16 <= d; i += 16) {  // two independent chains a step
    silu8(x + i, x + d + i, out + i);
    silu8(x + i + 8, x + d + i + 8, out + i + 8);
  }
  for (; i + 8 <= d; i += 8) silu8(x + i, x + d + i, out + i);
  if (i < d) {
    T gate[8] = {}, up[8] = {}, y[8];
    std::memcpy(gate, x + i, size_t(d - i) * sizeof(T));
    std::memcpy(up, x + d + i, size_t(d - i) * sizeof(T));
    silu8(gate, up, y);
    std::memcpy(out + i, y, size_t(d - i) * sizeof(T));
  }
}

}  // namespace

void silu_and_mul_row_avx2(const void* x, void* out, int64_t d, DType dtype) {
  switch (dtype) {
    case DType::kBF16: return silu_row(static_cast<const BFloat16*>(x), static_cast<BFloat16*>(out), d);
    case DType::kF16: return silu_row(static_cast<const Float16*>(x), static_cast<Float16*>(out), d);
    default: return silu_row(static_cast<const float*>(x), static_cast<float*>(out), d);
  }
}

void exp_f32_avx2(const float* x, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, exp_ps(_mm256_loadu_ps(x + i)));
  if (i < n) {
    float in[8] = {}, y[8];
    std::memcpy(in, x + i, size_t(n - i) * 4);
    _mm256_storeu_ps(y, exp_ps(_mm256_loadu_ps(in)));
    std::memcpy(out + i, y, size_t(n - i) * 4);
  }
}

}  // namespace fp8kit::ops::cpu

#include "ops/avx2_target_end.h"

#else  // not x86-64

namespace fp8kit::ops::cpu {
void silu_and_mul_row_avx2(const void*, void*, int64_t, DType) {
  fail(ErrorCode::kInternal, "silu_and_mul_row_avx2: this build has no AVX2 kernels");
}
void exp_f32_avx2(const float*, float*, int64_t) { fail(ErrorCode::kInternal, "exp_f32_avx2: no AVX2 kernels"); }
}  // namespace fp8kit::ops::cpu

#endif
