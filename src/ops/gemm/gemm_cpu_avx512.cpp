// The AVX-512-BF16 kernel family of the CPU GEMM engine (Zen 4, Sapphire Rapids and later), for
// problems whose operands are all e4m3fn or bf16 (W8A8, W8A16 with bf16 activations, BF16
// layers): both operands as bf16, which holds every e4m3 value exactly, and VDPBF16PS, which
// adds two exact products per f32 lane, twice the multiply-adds of an f32 FMA. Built for the
// baseline ISA; only the target region below uses AVX-512, and it runs only where cpu_features()
// reports it (gemm_cpu_run.cpp).
//
// e4m3 -> bf16 without F16C: two 128-entry byte tables (VPERMI2B on the code's low 7 bits) give
// the high and low byte of |value| as bf16, the sign bit is OR-ed in, and two VPERMT2B
// interleave the bytes into 32 bf16 each: 5 instructions per 64 codes (the AVX2 decode takes 24
// per 64). NaN codes become bf16 NaNs and propagate. VDPBF16PS treats bf16 subnormals (below
// 2^-126) as zero and flushes f32 subnormal results: e4m3 values are never such.
// Order of a chunk: lanes l of 32-element steps in k order (VDPBF16PS: pair 2l, 2l + 1), then a
// fixed butterfly over the 16 lanes (hsum16), the same in gemv and tile.
// Napkin math (Zen 4 core, ~3.6 GHz): VDPBF16PS zmm 1 a cycle = 230 GFLOP/s; the M = 1 GEMV does
// ~7 instructions per 64 weights: memory-bound on any DRAM. Tests: tests/cpu/test_gemm_cpu*.cpp.
#include "ops/gemm/gemm_cpu_families.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#include <immintrin.h>

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

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,avx512bf16,avx2,fma,f16c"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vbmi,avx512bf16,avx2,fma,f16c")
// GCC 12 flags the intrinsics' own _mm512_undefined_ps() pass-through as uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "ops/gemm/gemm_cpu_driver.h"

namespace fp8kit::ops::cpu {
namespace {

// bf16 bits of every e4m3fn code (exact: 4 significant bits, exponents 2^-9..2^8; NaN -> NaN).
inline const uint16_t* e4m3_bf16_table() {
  static const std::array<uint16_t, 256> table = [] {
    std::array<uint16_t, 256> t{};
    for (int c = 0; c < 256; ++c) t[size_t(c)] = float_to_bf16(e4m3fn_bits_to_float(uint8_t(c))).bits;
    return t;
  }();
  return table.data();
}

// The byte tables and interleave indices of the vector decode.
struct Fp8Bf16Decode {
  __m512i hi0, hi1, lo0, lo1, interleave0, interleave1, sign;
  Fp8Bf16Decode() {
    alignas(64) uint8_t hi[128], lo[128], i0[64], i1[64];
    const uint16_t* t = e4m3_bf16_table();
    for (int c = 0; c < 128; ++c) {
      hi[c] = uint8_t(t[c] >> 8);
      lo[c] = uint8_t(t[c] & 0xff);
    }
    for (int i = 0; i < 32; ++i) {
      i0[2 * i] = uint8_t(i), i0[2 * i + 1] = uint8_t(64 + i);       // lo[i], hi[i]: code i
      i1[2 * i] = uint8_t(32 + i), i1[2 * i + 1] = uint8_t(96 + i);  // code 32 + i
    }
    hi0 = _mm512_load_si512(hi), hi1 = _mm512_load_si512(hi + 64);
    lo0 = _mm512_load_si512(lo), lo1 = _mm512_load_si512(lo + 64);
    interleave0 = _mm512_load_si512(i0), interleave1 = _mm512_load_si512(i1);
    sign = _mm512_set1_epi8(int8_t(0x80));
  }
  // 64 codes -> bf16 of codes 0-31 (w0) and 32-63 (w1).
  void decode(__m512i x, __m512bh& w0, __m512bh& w1) const {
    __m512i h = _mm512_permutex2var_epi8(hi0, x, hi1);
    h = _mm512_ternarylogic_epi32(h, x, sign, 0xF8);  // h | (x & 0x80)
    const __m512i l = _mm512_permutex2var_epi8(lo0, x, lo1);
    w0 = (__m512bh)_mm512_permutex2var_epi8(l, interleave0, h);
    w1 = (__m512bh)_mm512_permutex2var_epi8(l, interleave1, h);
  }
};

inline const Fp8Bf16Decode& fp8_decode() {
  static const Fp8Bf16Decode d;
  return d;
}

// 64 elements of a B row at p (e4m3 codes or bf16) as two vectors of 32 bf16; `valid` < 64:
// zeros past it.
template <Operand B>
inline void load64(const uint8_t* p, int64_t valid, const Fp8Bf16Decode& dec, __m512bh& w0, __m512bh& w1) {
  if constexpr (B == Operand::kE4M3) {
    const __m512i x = valid >= 64 ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi8(__mmask64((uint64_t(1) << valid) - 1), p);
    dec.decode(x, w0, w1);
  } else {
    const int64_t v0 = std::min<int64_t>(valid, 32), v1 = std::max<int64_t>(0, valid - 32);
    w0 = (__m512bh)(v0 >= 32 ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi16(__mmask32((uint64_t(1) << v0) - 1), p));
    w1 = (__m512bh)(v1 >= 32 ? _mm512_loadu_si512(p + 64)
                             : _mm512_maskz_loadu_epi16(__mmask32((uint64_t(1) << v1) - 1), p + 64));
  }
}

template <Operand B>
constexpr int64_t kBytes = B == Operand::kE4M3 ? 1 : 2;

// The 16 horizontal sums of v[0..15] (lane l of result q: sum of v[q]'s lanes), each by the
// butterfly (l, l + 8), (l, l + 4), (l, l + 2), (l, l + 1).
inline void hsum16(const __m512* v, float* out) {
  __m512 s[8], u[4], w[2];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    s[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0x44), _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0xEE));
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    u[i] = _mm512_add_ps(_mm512_shuffle_f32x4(s[2 * i], s[2 * i + 1], 0x88), _mm512_shuffle_f32x4(s[2 * i], s[2 * i + 1], 0xDD));
  }
#pragma GCC unroll 2
  for (int i = 0; i < 2; ++i) {
    w[i] = _mm512_add_ps(_mm512_shuffle_ps(u[2 * i], u[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(u[2 * i], u[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  const __m512 r = _mm512_add_ps(_mm512_shuffle_ps(w[0], w[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_ps(w[0], w[1], _MM_SHUFFLE(3, 1, 3, 1)));
  // Lane 4q + j holds vector q + 4j.
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  _mm512_storeu_ps(out, _mm512_permutexvar_ps(order, r));
}

// hsum16's sums of v[0..7] alone (out[q] = the sum of v[q]'s lanes): the same butterfly, each
// vector's lanes added in the same pairs in the same order, so the same bits, in half the
// instructions. The GEMV's accumulators are M x R <= 8 for M <= 2 (M = 1: 8 rows of B), and
// with 64-wide block scales it sums them every 64 of K.
inline void hsum8(const __m512* v, float* out) {
  __m512 s[4];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    s[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0x44), _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0xEE));
  }
  const __m512 u0 = _mm512_add_ps(_mm512_shuffle_f32x4(s[0], s[1], 0x88), _mm512_shuffle_f32x4(s[0], s[1], 0xDD));
  const __m512 u1 = _mm512_add_ps(_mm512_shuffle_f32x4(s[2], s[3], 0x88), _mm512_shuffle_f32x4(s[2], s[3], 0xDD));
  const __m512 w = _mm512_add_ps(_mm512_shuffle_ps(u0, u1, _MM_SHUFFLE(1, 0, 1, 0)), _mm512_shuffle_ps(u0, u1, _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 r = _mm512_add_ps(_mm512_shuffle_ps(w, w, _MM_SHUFFLE(2, 0, 2, 0)), _mm512_shuffle_ps(w, w, _MM_SHUFFLE(3, 1, 3, 1)));
  // Lane 4q holds vector q, lane 4q + 1 vector q + 4.
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
  _mm256_storeu_ps(out, _mm512_castps512_ps256(_mm512_permutexvar_ps(order, r)));
}

struct Avx512Bf16Kernels {
  using Elem = uint16_t;  // bf16 bits
  static constexpr int64_t kKAlign = 32;
  static constexpr int kTileM = 4;

  static void convert_a(const GemmProblem& p, int64_t i0, int64_t i1, uint16_t* dst, int64_t ld, float* unit) {
    const uint16_t* table = e4m3_bf16_table();
    for (int64_t i = i0; i < i1; ++i) {
      const uint8_t* src = row_ptr(p.a, p.a_type, a_row(p, i), p.lda);
      uint16_t* d = dst + (i - i0) * ld;
      if (p.a_type == Operand::kE4M3) {
        for (int64_t e = 0; e < p.k; ++e) d[e] = table[src[e]];
      } else {
        std::memcpy(d, src, size_t(p.k) * 2);
      }
      std::fill(d + p.k, d + ld, uint16_t(0));
      unit[i - i0] = 1.0f;
    }
  }

  // Accumulators M x R <= 16 and decoded rows 2R: with the activations, at most 32 registers.
  static int gemv_rows_per_call(int64_t m) { return m == 1 ? 8 : m <= 4 ? 4 : 2; }

  template <int M, int R, Operand B>
  static void gemv(GemvArgs& g) {
    const Fp8Bf16Decode& dec = fp8_decode();
    const uint16_t* a = static_cast<const uint16_t*>(g.a);
    float* partial = g.partial;
    for (int64_t k0 = 0; k0 < g.k; k0 += g.chunk) {
      const int64_t k1 = std::min(g.k, k0 + g.chunk);
      __m512 acc[16];
#pragma GCC unroll 16
      for (int e = 0; e < 16; ++e) acc[e] = _mm512_setzero_ps();
      // Each step decodes the R weight rows first, then loads every activation vector once for
      // all of them (loading it per weight row made the loop load-bound).
      for (int64_t kk = k0; kk < k1; kk += 64) {
        const int64_t valid = std::min<int64_t>(64, k1 - kk);
        gemv_prefetch<R>(g, g.k * kBytes<B>, kk * kBytes<B>, 64 * kBytes<B>);
        __m512bh w0[R], w1[R];
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) load64<B>(g.b + r * g.ldb_bytes + kk * kBytes<B>, valid, dec, w0[r], w1[r]);
#pragma GCC unroll 8
        for (int m = 0; m < M; ++m) {
          const uint16_t* am = a + m * g.lda + kk;
          const __m512bh x0 = (__m512bh)_mm512_loadu_si512(am);
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r) acc[m * R + r] = _mm512_dpbf16_ps(acc[m * R + r], w0[r], x0);
          if (valid > 32) {
            const __m512bh x1 = (__m512bh)_mm512_loadu_si512(am + 32);
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) acc[m * R + r] = _mm512_dpbf16_ps(acc[m * R + r], w1[r], x1);
          }
        }
      }
      alignas(64) float sums[16];
      if constexpr (M * R <= 8) {
        hsum8(acc, sums);
      } else {
        hsum16(acc, sums);
      }
      for (int e = 0; e < M * R; ++e) partial[e] = sums[e];
      partial += M * R;
    }
    g.nan_code = false;  // NaN codes decode to NaN here
  }

  static GemvFn gemv_fn(Operand b, int64_t m, int r) {
    return b == Operand::kE4M3 ? shapes<Operand::kE4M3>(m, r) : shapes<Operand::kBF16>(m, r);
  }

  static void tile(const TileArgs& t) {
    const uint16_t* a = static_cast<const uint16_t*>(t.a);
    const uint16_t* b = static_cast<const uint16_t*>(t.b);
    float* out = t.out;
    for (int64_t c0 = 0; c0 < t.len; c0 += t.chunk, out += t.chunk_stride) {
      const int64_t c1 = std::min(t.len, c0 + t.chunk);
      __m512 acc[16];
#pragma GCC unroll 16
      for (int e = 0; e < 16; ++e) acc[e] = _mm512_setzero_ps();
      for (int64_t kk = c0; kk < c1; kk += 32) {
        __m512bh x[4];
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i) x[i] = (__m512bh)_mm512_loadu_si512(a + i * t.lda + kk);
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          const __m512bh w = (__m512bh)_mm512_loadu_si512(b + j * t.ldb + kk);
#pragma GCC unroll 4
          for (int i = 0; i < 4; ++i) acc[i * 4 + j] = _mm512_dpbf16_ps(acc[i * 4 + j], w, x[i]);
        }
      }
      alignas(64) float sums[16];
      hsum16(acc, sums);
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) std::memcpy(out + i * t.ldo, sums + 4 * i, 16);
    }
  }

  template <Operand B>
  static void decode_rows(const DecodeArgs& d) {
    const Fp8Bf16Decode& dec = fp8_decode();
    const int64_t len32 = round_up(d.len, 32);
    for (int64_t r = 0; r < d.rows; ++r) {
      const uint8_t* row = d.b + r * d.ldb_bytes;
      uint16_t* dst = static_cast<uint16_t*>(d.dst) + r * d.ld;
      for (int64_t kk = 0; kk < len32; kk += 64) {
        __m512bh w0, w1;
        load64<B>(row + kk * kBytes<B>, std::min<int64_t>(64, d.len - kk), dec, w0, w1);
        _mm512_storeu_si512(dst + kk, (__m512i)w0);
        if (kk + 32 < len32) _mm512_storeu_si512(dst + kk + 32, (__m512i)w1);
      }
    }
  }

  static void decode_b(Operand type, const DecodeArgs& d) {
    if (type == Operand::kE4M3) return decode_rows<Operand::kE4M3>(d);
    return decode_rows<Operand::kBF16>(d);
  }

 private:
  template <Operand B>
  static GemvFn shapes(int64_t m, int r) {
    switch (m * 16 + r) {
      case 1 * 16 + 8: return gemv<1, 8, B>;
      case 1 * 16 + 1: return gemv<1, 1, B>;
      case 2 * 16 + 4: return gemv<2, 4, B>;
      case 2 * 16 + 1: return gemv<2, 1, B>;
      case 3 * 16 + 4: return gemv<3, 4, B>;
      case 3 * 16 + 1: return gemv<3, 1, B>;
      case 4 * 16 + 4: return gemv<4, 4, B>;
      case 4 * 16 + 1: return gemv<4, 1, B>;
      case 5 * 16 + 2: return gemv<5, 2, B>;
      case 5 * 16 + 1: return gemv<5, 1, B>;
      case 6 * 16 + 2: return gemv<6, 2, B>;
      case 6 * 16 + 1: return gemv<6, 1, B>;
      case 7 * 16 + 2: return gemv<7, 2, B>;
      case 7 * 16 + 1: return gemv<7, 1, B>;
      case 8 * 16 + 2: return gemv<8, 2, B>;
      case 8 * 16 + 1: return gemv<8, 1, B>;
    }
    return nullptr;
  }
};

}  // namespace

void run_gemm_avx512_bf16(const GemmProblem& problem, const GemmPlan& plan) { run_gemm<Avx512Bf16Kernels>(problem, plan); }

}  // namespace fp8kit::ops::cpu

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif

#else  // not x86-64

#include "core/check.h"

namespace fp8kit::ops::cpu {
void run_gemm_avx512_bf16(const GemmProblem&, const GemmPlan&) {
  fail(ErrorCode::kInternal, "run_gemm_avx512_bf16: this build has no AVX-512 kernels");
}
}  // namespace fp8kit::ops::cpu

#endif
