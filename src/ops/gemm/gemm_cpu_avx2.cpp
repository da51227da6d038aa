// The AVX2 + FMA + F16C kernel family of the CPU GEMM engine (every x86-64 CPU since Haswell /
// Zen 1). The file is built for the baseline ISA; only the code inside the target region below
// uses AVX2, and it runs only when cpu_features() reports it (gemm_cpu_run.cpp).
//
// FP8 e4m3 decode without a table: a code s.eeee.mmm placed into the top of an f16 as
// s.0eeee.mmm0000000 is the code's value times 2^-8 (f16's exponent bias is 8 larger), subnormals
// included, and F16C widens 8 of those to f32 in one instruction. From 32 codes: two byte
// unpacks against zero (code << 8), an arithmetic shift by one and a mask of bit 14 per 16 codes,
// then four VCVTPH2PS: 3 integer ops per 16 weights plus one conversion per 8. The byte-max with
// (code | 0x80) flags NaN codes (0x7f, 0xff), whose outputs the driver sets to NaN.
//
// Napkin math (2 Zen 4 cores at ~2.9 GHz, 4 vector pipes each): the M = 1 GEMV issues ~16 ops per
// 32 weights -> ~8 weights a cycle a core, ~45 GB/s of FP8 on two cores, above DRAM's ~20: it
// streams at memory speed. The 3 x 4 panel tile issues 12 FMAs per 7 loads: FMA-bound.
// Loops: gemm_cpu_driver.h; tests: tests/cpu/test_gemm_cpu.cpp; bench: bench/bench_cpu_gemm.cpp.
#include "ops/gemm/gemm_cpu_families.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "core/parallel.h"
#include "core/prefetch.h"
#include "fp8kit/fp8.h"
#include "fp8kit/half.h"
#include "ops/gemm/gemm_cpu_plan.h"
#include "ops/gemm/gemm_cpu_problem.h"

#include "ops/avx2_target_begin.h"

#include "ops/gemm/gemm_cpu_driver.h"

namespace fp8kit::ops::cpu {
namespace {

// ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)): lane_tree of gemm_cpu_driver.h.
inline float hsum1(__m256 v) {
  const __m256 s1 = _mm256_add_ps(v, _mm256_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1)));
  const __m256 s2 = _mm256_add_ps(s1, _mm256_permute_ps(s1, _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(s2), _mm256_extractf128_ps(s2, 1)));
}

// The same tree for four vectors at once: element q of the result is hsum1(v_q).
inline __m128 hsum4(__m256 v0, __m256 v1, __m256 v2, __m256 v3) {
  const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(v0, v1), _mm256_hadd_ps(v2, v3));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

// 8 e4m3 codes (low 8 bytes of x) in the decode domain.
inline __m256 fp8x8_to_f32(__m128i x) {
  const __m128i w = _mm_unpacklo_epi8(_mm_setzero_si128(), x);
  return _mm256_cvtph_ps(_mm_and_si128(_mm_srai_epi16(w, 1), _mm_set1_epi16(int16_t(0xbfff))));
}

// 32 e4m3 codes in the decode domain, w[q] holding codes [8q, 8q + 8).
inline void fp8x32_to_f32(__m256i x, __m256* w) {
  const __m256i zero = _mm256_setzero_si256(), mask = _mm256_set1_epi16(int16_t(0xbfff));
  const __m256i lo = _mm256_and_si256(_mm256_srai_epi16(_mm256_unpacklo_epi8(zero, x), 1), mask);  // 0-7 | 16-23
  const __m256i hi = _mm256_and_si256(_mm256_srai_epi16(_mm256_unpackhi_epi8(zero, x), 1), mask);  // 8-15 | 24-31
  w[0] = _mm256_cvtph_ps(_mm256_castsi256_si128(lo));
  w[1] = _mm256_cvtph_ps(_mm256_castsi256_si128(hi));
  w[2] = _mm256_cvtph_ps(_mm256_extracti128_si256(lo, 1));
  w[3] = _mm256_cvtph_ps(_mm256_extracti128_si256(hi, 1));
}

// Running max of (code | 0x80): a byte reaches 0xff exactly when a NaN code (0x7f, 0xff) passed.
// (Constructed explicitly: an implicit constructor would be compiled outside the target region.)
struct NanWatch {
  __m256i wide;
  __m128i narrow;
  NanWatch() : wide(_mm256_setzero_si256()), narrow(_mm_setzero_si128()) {}
  void see(__m256i x) { wide = _mm256_max_epu8(wide, _mm256_or_si256(x, _mm256_set1_epi8(int8_t(0x80)))); }
  void see(__m128i x) { narrow = _mm_max_epu8(narrow, _mm_or_si128(x, _mm_set1_epi8(int8_t(0x80)))); }
  bool seen() const {
    const __m128i m = _mm_max_epu8(narrow, _mm_max_epu8(_mm256_castsi256_si128(wide), _mm256_extracti128_si256(wide, 1)));
    return _mm_movemask_epi8(_mm_cmpeq_epi8(m, _mm_set1_epi8(int8_t(0xff)))) != 0;
  }
};

template <Operand B>
constexpr int64_t kBytes = B == Operand::kE4M3 ? 1 : B == Operand::kF32 ? 4 : 2;

// 8 elements of a B row from p, in the decode domain.
template <Operand B>
inline __m256 load8(const uint8_t* p, NanWatch& nan) {
  if constexpr (B == Operand::kE4M3) {
    const __m128i x = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    nan.see(x);  // the upper 8 bytes are zero
    return fp8x8_to_f32(x);
  } else if constexpr (B == Operand::kBF16) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(x), 16));
  } else if constexpr (B == Operand::kF16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  } else {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  }
}

// The first `valid` (< 8) elements at p, zeros after.
template <Operand B>
inline __m256 load8_partial(const uint8_t* p, int64_t valid, NanWatch& nan) {
  alignas(32) uint8_t tmp[32] = {};
  std::memcpy(tmp, p, size_t(valid * kBytes<B>));
  return load8<B>(tmp, nan);
}

// 32 elements at p as w[0..3] in k order.
template <Operand B>
inline void load32(const uint8_t* p, __m256* w, NanWatch& nan) {
  if constexpr (B == Operand::kE4M3) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    nan.see(x);
    fp8x32_to_f32(x, w);
  } else {
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) w[q] = load8<B>(p + q * 8 * kBytes<B>, nan);
  }
}

struct Avx2Kernels {
  using Elem = float;
  static constexpr int64_t kKAlign = 8;
  static constexpr int kTileM = 3;
  static void convert_a(const GemmProblem& p, int64_t i0, int64_t i1, float* dst, int64_t ld, float* unit) {
    convert_a_rows(p, i0, i1, dst, ld, unit);
  }
  static int gemv_rows_per_call(int64_t m) { return gemv_rows_per_call_8(m); }
  static GemvFn gemv_fn(Operand b, int64_t m, int r) { return gemv_fn_8_any<Avx2Kernels>(b, m, r); }

  template <int M, int R, Operand B>
  static void gemv(GemvArgs& g) {
    float* partial = g.partial;
    NanWatch nan;
    for (int64_t k0 = 0; k0 < g.k; k0 += g.chunk) {
      const int64_t k1 = std::min(g.k, k0 + g.chunk);
      __m256 acc[M * R];
#pragma GCC unroll 8
      for (int e = 0; e < M * R; ++e) acc[e] = _mm256_setzero_ps();
      int64_t kk = k0;
      for (; kk + 32 <= k1; kk += 32) {
        gemv_prefetch<R>(g, g.k * kBytes<B>, kk * kBytes<B>, 32 * kBytes<B>);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          __m256 w[4];
          load32<B>(g.b + r * g.ldb_bytes + kk * kBytes<B>, w, nan);
#pragma GCC unroll 8
          for (int m = 0; m < M; ++m) {
            const float* am = static_cast<const float*>(g.a) + m * g.lda + kk;
            __m256& c = acc[m * R + r];
            c = _mm256_fmadd_ps(w[0], _mm256_loadu_ps(am), c);
            c = _mm256_fmadd_ps(w[1], _mm256_loadu_ps(am + 8), c);
            c = _mm256_fmadd_ps(w[2], _mm256_loadu_ps(am + 16), c);
            c = _mm256_fmadd_ps(w[3], _mm256_loadu_ps(am + 24), c);
          }
        }
      }
      for (; kk < k1; kk += 8) {
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const uint8_t* p = g.b + r * g.ldb_bytes + kk * kBytes<B>;
          const __m256 w = kk + 8 <= k1 ? load8<B>(p, nan) : load8_partial<B>(p, k1 - kk, nan);
#pragma GCC unroll 8
          for (int m = 0; m < M; ++m) acc[m * R + r] = _mm256_fmadd_ps(w, _mm256_loadu_ps(static_cast<const float*>(g.a) + m * g.lda + kk), acc[m * R + r]);
        }
      }
      int e = 0;
      for (; e + 4 <= M * R; e += 4) _mm_storeu_ps(partial + e, hsum4(acc[e], acc[e + 1], acc[e + 2], acc[e + 3]));
      for (; e < M * R; ++e) partial[e] = hsum1(acc[e]);
      partial += M * R;
    }
    g.nan_code = B == Operand::kE4M3 && nan.seen();
  }

  static void tile(const TileArgs& t) {
    const float* a0 = static_cast<const float*>(t.a);
    const float* a1 = a0 + t.lda;
    const float* a2 = a0 + 2 * t.lda;
    const float* tb = static_cast<const float*>(t.b);
    float* out = t.out;
    for (int64_t c0 = 0; c0 < t.len; c0 += t.chunk, out += t.chunk_stride) {
      const int64_t c1 = std::min(t.len, c0 + t.chunk);
      __m256 c[3][4];
#pragma GCC unroll 3
      for (int i = 0; i < 3; ++i) {
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) c[i][j] = _mm256_setzero_ps();
      }
      for (int64_t kk = c0; kk < c1; kk += 8) {
        const __m256 x0 = _mm256_loadu_ps(a0 + kk), x1 = _mm256_loadu_ps(a1 + kk), x2 = _mm256_loadu_ps(a2 + kk);
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          const __m256 b = _mm256_loadu_ps(tb + j * t.ldb + kk);
          c[0][j] = _mm256_fmadd_ps(b, x0, c[0][j]);
          c[1][j] = _mm256_fmadd_ps(b, x1, c[1][j]);
          c[2][j] = _mm256_fmadd_ps(b, x2, c[2][j]);
        }
      }
#pragma GCC unroll 3
      for (int i = 0; i < 3; ++i) _mm_storeu_ps(out + i * t.ldo, hsum4(c[i][0], c[i][1], c[i][2], c[i][3]));
    }
  }

  template <Operand B>
  static void decode_rows(const DecodeArgs& d) {
    for (int64_t r = 0; r < d.rows; ++r) {
      const uint8_t* row = d.b + r * d.ldb_bytes;
      float* dst = static_cast<float*>(d.dst) + r * d.ld;
      NanWatch nan;
      int64_t kk = 0;
      for (; kk + 32 <= d.len; kk += 32) {
        __m256 w[4];
        load32<B>(row + kk * kBytes<B>, w, nan);
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) _mm256_storeu_ps(dst + kk + 8 * q, w[q]);
      }
      for (; kk < d.len; kk += 8) {
        const uint8_t* p = row + kk * kBytes<B>;
        _mm256_storeu_ps(dst + kk, kk + 8 <= d.len ? load8<B>(p, nan) : load8_partial<B>(p, d.len - kk, nan));
      }
      if (B == Operand::kE4M3 && nan.seen()) d.nan[r] = 1;
    }
  }

  static void decode_b(Operand type, const DecodeArgs& d) {
    switch (type) {
      case Operand::kE4M3: return decode_rows<Operand::kE4M3>(d);
      case Operand::kBF16: return decode_rows<Operand::kBF16>(d);
      case Operand::kF16: return decode_rows<Operand::kF16>(d);
      case Operand::kF32: return decode_rows<Operand::kF32>(d);
    }
  }
};

}  // namespace

void run_gemm_avx2(const GemmProblem& problem, const GemmPlan& plan) { run_gemm<Avx2Kernels>(problem, plan); }

}  // namespace fp8kit::ops::cpu

#include "ops/avx2_target_end.h"

#else  // not x86-64

#include "core/check.h"

namespace fp8kit::ops::cpu {
void run_gemm_avx2(const GemmProblem&, const GemmPlan&) {
  fail(ErrorCode::kInternal, "run_gemm_avx2: this build has no AVX2 kernels");
}
}  // namespace fp8kit::ops::cpu

#endif
