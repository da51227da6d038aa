// AVX2 element kernels of the CPU activation quantization (quant_cpu.h), bit-exact with the
// reference's loops (quant_ref_loops.h): quantize_fp8 of quant_encode.h on 8 lanes (an integer
// min on the magnitude bits, one f32 add that rounds to the e4m3 grid, integer code arithmetic),
// 32 elements packed to bytes per step; tails through the scalar quantize_fp8. Divisions use
// divide_with_reciprocal (5 FMA-class ops, the IEEE quotient where divisor_is_regular holds, as
// the CUDA kernels do; s > 0 always) and a true division elsewhere. Tested by
// tests/cpu/test_quant_cpu.cpp.
#include "ops/quant/quant_cpu.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/check.h"
#include "fp8kit/fp8.h"
#include "fp8kit/half.h"
#include "ops/quant/quant_encode.h"

#include "ops/avx2_target_begin.h"

namespace fp8kit::ops::cpu {
namespace {

// 8 elements of T at p as f32 (exact; NaN quieted as load_float does).
template <typename T>
inline __m256 load8(const T* p) {
  if constexpr (sizeof(T) == 4) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(x), 16));
  } else {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
}

// quantize_fp8<F>(v, max) on 8 lanes, codes in the low byte of each 32-bit lane.
template <typename F>
inline __m256i encode8(__m256 v, __m256i max_bits) {
  constexpr int32_t kMinNormalBiasedExp = 127 + 1 - F::kBias;
  const __m256i u = _mm256_castps_si256(v);
  __m256i a = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
  const __m256i nan = _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7f800000));
  __m256i sign = _mm256_andnot_si256(nan, _mm256_and_si256(_mm256_srli_epi32(u, 24), _mm256_set1_epi32(0x80)));
  a = _mm256_min_epi32(a, max_bits);
  const __m256i e = _mm256_max_epi32(_mm256_srli_epi32(a, 23), _mm256_set1_epi32(kMinNormalBiasedExp));
  const __m256i magic = _mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(23 - F::kManBits)), 23);
  const __m256i sum = _mm256_castps_si256(_mm256_add_ps(_mm256_castsi256_ps(a), _mm256_castsi256_ps(magic)));
  const __m256i code = _mm256_add_epi32(_mm256_sub_epi32(sum, magic),
                                        _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(kMinNormalBiasedExp)), F::kManBits));
  if (F::kFnuz) sign = _mm256_andnot_si256(_mm256_cmpeq_epi32(code, _mm256_setzero_si256()), sign);
  return _mm256_or_si256(sign, code);
}

// Four vectors of codes (elements 0-7, 8-15, 16-23, 24-31) to 32 bytes in order.
inline void store32(uint8_t* out, __m256i c0, __m256i c1, __m256i c2, __m256i c3) {
  const __m256i p01 = _mm256_packus_epi32(c0, c1), p23 = _mm256_packus_epi32(c2, c3);  // per 128-bit lane
  const __m256i bytes = _mm256_packus_epi16(p01, p23);  // [c0 lo, c1 lo, c2 lo, c3 lo | c0 hi, c1 hi, ...]
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_permutevar8x32_epi32(bytes, order));
}

template <typename T>
uint32_t absmax_bits(const void* xv, int64_t n) {
  const T* x = static_cast<const T*>(xv);
  int64_t i = 0;
  uint32_t result = 0;
  if constexpr (sizeof(T) == 4) {
    __m256i m = _mm256_setzero_si256();
    for (; i + 8 <= n; i += 8) {
      const __m256i a = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)), _mm256_set1_epi32(0x7fffffff));
      m = _mm256_max_epi32(m, _mm256_andnot_si256(_mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7f800000)), a));
    }
    alignas(32) uint32_t lanes[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), m);
    for (uint32_t l : lanes) result = std::max(result, l);
  } else {
    const int16_t inf = std::is_same_v<T, BFloat16> ? 0x7f80 : 0x7c00;
    __m256i m = _mm256_setzero_si256();
    for (; i + 16 <= n; i += 16) {
      const __m256i a = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)), _mm256_set1_epi16(0x7fff));
      m = _mm256_max_epi16(m, _mm256_andnot_si256(_mm256_cmpgt_epi16(a, _mm256_set1_epi16(inf)), a));
    }
    alignas(32) uint16_t lanes[16];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), m);
    for (uint16_t l : lanes) result = std::max<uint32_t>(result, l);
  }
  for (; i < n; ++i) result = std::max(result, abs_bits(x[i]));
  return result;
}

// out[i] = quantize_fp8<F>(op(load_float(x[i])), fp8_max): 32 at a time, then scalar.
template <typename T, typename F, typename VecOp, typename ScalarOp>
inline void quantize_run(const T* x, int64_t n, float fp8_max, uint8_t* out, VecOp vop, ScalarOp sop) {
  const __m256i max_bits = _mm256_set1_epi32(int32_t(float_to_bits(fp8_max)));
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    store32(out + i, encode8<F>(vop(load8(x + i)), max_bits), encode8<F>(vop(load8(x + i + 8)), max_bits),
            encode8<F>(vop(load8(x + i + 16)), max_bits), encode8<F>(vop(load8(x + i + 24)), max_bits));
  }
  for (; i < n; ++i) out[i] = quantize_fp8<F>(sop(load_float(x[i])), fp8_max);
}

template <typename T, typename F>
void quantize_mul(const void* xv, int64_t n, float inv, float fp8_max, uint8_t* out) {
  const __m256 vinv = _mm256_set1_ps(inv);
  quantize_run<T, F>(static_cast<const T*>(xv), n, fp8_max, out, [&](__m256 v) { return _mm256_mul_ps(v, vinv); },
                     [&](float v) { return v * inv; });
}

template <typename T, typename F>
void quantize_div(const void* xv, int64_t n, float s, float amax, float fp8_max, uint8_t* out) {
  const T* x = static_cast<const T*>(xv);
  const float z = 1.0f / s;
  const __m256 vs = _mm256_set1_ps(s);
  if (divisor_is_regular(s, z, amax)) {
    const __m256 vz = _mm256_set1_ps(z), sign = _mm256_set1_ps(-0.0f);
    // divide_with_reciprocal of quant_encode.h, lane by lane. With FMA enabled GCC turns
    // -(q * s - x) into x - q * s, which makes -0 / s come out +0; the quotient by a positive s
    // has x's sign, so the sign is taken from x. The tails divide.
    auto vdiv = [&](__m256 v) {
      __m256 q = _mm256_mul_ps(v, vz);
      __m256 r = _mm256_fmsub_ps(q, vs, v);
      q = _mm256_fnmadd_ps(r, vz, q);
      r = _mm256_fmsub_ps(q, vs, v);
      q = _mm256_fnmadd_ps(r, vz, q);
      return _mm256_or_ps(_mm256_andnot_ps(sign, q), _mm256_and_ps(sign, v));
    };
    quantize_run<T, F>(x, n, fp8_max, out, vdiv, [&](float v) { return v / s; });
  } else {
    quantize_run<T, F>(x, n, fp8_max, out, [&](__m256 v) { return _mm256_div_ps(v, vs); }, [&](float v) { return v / s; });
  }
}

template <typename T, typename F>
constexpr QuantKernels kKernels = {absmax_bits<T>, quantize_mul<T, F>, quantize_div<T, F>};

}  // namespace

const QuantKernels& quant_kernels_avx2(DType in, bool fnuz) {
  switch (in) {
    case DType::kF32: return fnuz ? kKernels<float, E4M3FNUZFormat> : kKernels<float, E4M3FNFormat>;
    case DType::kF16: return fnuz ? kKernels<Float16, E4M3FNUZFormat> : kKernels<Float16, E4M3FNFormat>;
    case DType::kBF16: return fnuz ? kKernels<BFloat16, E4M3FNUZFormat> : kKernels<BFloat16, E4M3FNFormat>;
    default: fail(ErrorCode::kInternal, "quant_kernels_avx2: unexpected input dtype {}", dtype_name(in));
  }
}

}  // namespace fp8kit::ops::cpu

#include "ops/avx2_target_end.h"

#else  // not x86-64

namespace fp8kit::ops::cpu {
const QuantKernels& quant_kernels_avx2(DType, bool) {
  fail(ErrorCode::kInternal, "quant_kernels_avx2: this build has no AVX2 kernels");
}
}  // namespace fp8kit::ops::cpu

#endif
