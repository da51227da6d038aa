// 8 elements of a float tensor (f32, bf16, f16) in AVX2 lanes, for the CPU backend's AVX2 kernels:
// loads widen exactly, stores round as from_float<T> does (bf16 to nearest even with NaN made the
// quiet NaN of its sign, as float_to_bf16; f16 by VCVTPS2PH with NaNs made canonical, as
// float_to_f16). Include it inside a region compiled for AVX2/FMA/F16C (a target pragma), which
// gives these functions that target too. Tests: the kernels' (test_activation_cpu.cpp,
// test_rms_norm.cpp) byte comparisons against the reference.
#pragma once

#include <immintrin.h>

#include <type_traits>

#include "fp8kit/half.h"

namespace fp8kit::ops::avx2 {

template <typename T>
inline __m256 load8(const T* p) {
  if constexpr (sizeof(T) == 4) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
  } else {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
}

// from_float<T> of 8 lanes, as 8 16-bit values (T bf16 or f16).
template <typename T>
inline __m128i narrow8(__m256 v) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    const __m256i u = _mm256_castps_si256(v);
    const __m256i high = _mm256_srli_epi32(u, 16);
    const __m256i rounded =
        _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), _mm256_and_si256(high, _mm256_set1_epi32(1)))), 16);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
    const __m256i quiet = _mm256_or_si256(_mm256_set1_epi32(0x7fc0), _mm256_and_si256(high, _mm256_set1_epi32(0x8000)));
    const __m256i r = _mm256_blendv_epi8(rounded, quiet, nan);
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08));
  } else {
    const __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m128i nan = _mm_cmpgt_epi16(_mm_and_si128(h, _mm_set1_epi16(0x7fff)), _mm_set1_epi16(0x7c00));
    const __m128i quiet = _mm_or_si128(_mm_and_si128(h, _mm_set1_epi16(int16_t(0x8000))), _mm_set1_epi16(0x7e00));
    return _mm_blendv_epi8(h, quiet, nan);
  }
}

// 8 16-bit values of T as f32 (exact).
template <typename T>
inline __m256 widen8(__m128i h) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  } else {
    return _mm256_cvtph_ps(h);
  }
}

// from_float<T> of 8 lanes stored at p.
template <typename T>
inline void store8(T* p, __m256 v) {
  if constexpr (sizeof(T) == 4) {
    _mm256_storeu_ps(reinterpret_cast<float*>(p), v);
  } else {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), narrow8<T>(v));
  }
}

// to_float(from_float<T>(v)) of 8 lanes.
template <typename T>
inline __m256 round8(__m256 v) {
  if constexpr (sizeof(T) == 4) {
    return v;
  } else {
    return widen8<T>(narrow8<T>(v));
  }
}

}  // namespace fp8kit::ops::avx2
