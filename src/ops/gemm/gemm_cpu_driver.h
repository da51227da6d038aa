// The fast CPU GEMM engine's loops, written once and compiled by every kernel family TU
// (gemm_cpu_portable.cpp, gemm_cpu_avx2.cpp, gemm_cpu_avx512.cpp) for its instruction set:
// everything here has internal linkage, so each family gets its own copy and none leaks into code
// built for another ISA. A family TU includes this header's dependencies first, then opens its
// target region, then includes this header and defines its Kernels struct:
//   Elem                      element of the converted A rows and decoded B panels (f32, bf16 bits)
//   kKAlign, kTileM           rows padded to a multiple of kKAlign elements; tiles of kTileM x 4
//   convert_a(...)            rows of A to Elem (convert_a_rows for f32 families)
//   gemv_rows_per_call(m), gemv_fn(b, m, r)   the GEMV kernels: M rows of A times r rows of B
//   tile(TileArgs)            kTileM x 4 outputs of whole chunks from A rows and a decoded panel
//   decode_b(b, DecodeArgs)   rows of B to Elem
// and calls run_gemm<Kernels>. Within a family the summation order of a chunk is the same in
// gemv and tile, so the GEMV and panel shapes give the same bits. Reference: gemm_ref.cpp,
// weight_only_ref.cpp, matmul_16bit_ref.cpp, fused_experts_gemm_ref.cpp; tests:
// tests/cpu/test_gemm_cpu*.cpp.
#pragma once

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

namespace fp8kit::ops::cpu {
namespace {

inline int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

// Row stride of a family's buffer holding `len` elements a row (zero-padded to a multiple of
// kKAlign): 64 bytes more, so that rows of power-of-two lengths do not all fall into the same L1
// sets.
template <class K>
int64_t padded_ld(int64_t len) {
  return round_up(len, K::kKAlign) + int64_t(64 / sizeof(typename K::Elem));
}

// Per-thread scratch that grows to the largest size asked and stays: no allocation per call
// after the first of a shape.
template <int kSlot, typename T = float>
T* scratch(size_t count) {
  thread_local std::vector<T> buffer;
  if (buffer.size() < count) buffer.resize(count);
  return buffer.data();
}

// The sum of 8 lanes every family uses: ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)).
inline float lane_tree(const float* l) { return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7])); }

// e4m3fn codes in B's decode domain: value * 2^-8 (what the F16C decode gives: the code's bits
// placed into an f16 whose exponent bias is 8 larger, exact for subnormals too). NaN codes give
// +-1.875 there (the F16C form cannot tell them apart); they are flagged and their outputs set
// to NaN (mark_nan_rows). So that products keep their true magnitude (tiny activations times
// 2^-8 would fall into f32 subnormals and lose bits), each activation row is scaled by 2^8 when
// that cannot overflow (every finite |a| < 2^120; always for FP8 activations), and the row's
// partials by 2^8 otherwise: row_unit.
inline constexpr float kFp8DecodeUnit = 256.0f;

inline const float* e4m3_decode_domain_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int c = 0; c < 256; ++c) {
      const uint32_t f16 = (uint32_t(c & 0x80) << 8) | (uint32_t(c & 0x7f) << 7);
      t[size_t(c)] = f16_to_float(Float16{uint16_t(f16)});
    }
    return t;
  }();
  return table.data();
}

inline const float* e4m3_value_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int c = 0; c < 256; ++c) t[size_t(c)] = e4m3fn_bits_to_float(uint8_t(c));
    return t;
  }();
  return table.data();
}

inline bool is_e4m3_nan(uint8_t c) { return (c & 0x7f) == 0x7f; }

inline int64_t operand_size(Operand t) { return t == Operand::kE4M3 ? 1 : t == Operand::kF32 ? 4 : 2; }

inline const uint8_t* row_ptr(const void* base, Operand t, int64_t row, int64_t ld) {
  return static_cast<const uint8_t*>(base) + row * ld * operand_size(t);
}

// Element e of a 16/32-bit or FP8 operand row as its exact f32 value.
inline float widen(const uint8_t* row, Operand t, int64_t e) {
  switch (t) {
    case Operand::kE4M3: return e4m3_value_table()[row[e]];
    case Operand::kBF16: {
      uint16_t bits;
      std::memcpy(&bits, row + 2 * e, 2);
      return bf16_to_float(BFloat16{bits});
    }
    case Operand::kF16: {
      uint16_t bits;
      std::memcpy(&bits, row + 2 * e, 2);
      return f16_to_float(Float16{bits});
    }
    case Operand::kF32: {
      float v;
      std::memcpy(&v, row + 4 * e, 4);
      return v;
    }
  }
  return 0.0f;
}

// Element e of a B row in B's decode domain (the portable family's decode).
inline float decode_b_element(const uint8_t* row, Operand t, int64_t e) {
  return t == Operand::kE4M3 ? e4m3_decode_domain_table()[row[e]] : widen(row, t, e);
}


inline int64_t a_row(const GemmProblem& p, int64_t i) { return p.a_rows != nullptr ? p.a_rows[i] : i; }
inline int64_t out_row(const GemmProblem& p, int64_t i) { return p.out_rows != nullptr ? p.out_rows[i] : i; }

// Rows [i0, i1) of A as exact f32 (NaN codes stay NaN) into dst, row stride ld >= k, zeros past k;
// for an FP8 B scaled by 2^8 where that is exact, with the factor its partials still need in
// unit[i - i0] (1 or 2^8; always 1 for other B types).
inline void convert_a_rows(const GemmProblem& p, int64_t i0, int64_t i1, float* dst, int64_t ld, float* unit) {
  for (int64_t i = i0; i < i1; ++i) {
    const uint8_t* src = row_ptr(p.a, p.a_type, a_row(p, i), p.lda);
    float* d = dst + (i - i0) * ld;
    if (p.a_type == Operand::kF32) {
      std::memcpy(d, src, size_t(p.k) * 4);
    } else if (p.a_type == Operand::kE4M3) {
      const float* table = e4m3_value_table();
      for (int64_t e = 0; e < p.k; ++e) d[e] = table[src[e]];
    } else {
      for (int64_t e = 0; e < p.k; ++e) d[e] = widen(src, p.a_type, e);
    }
    for (int64_t e = p.k; e < ld; ++e) d[e] = 0.0f;
    unit[i - i0] = 1.0f;
    if (p.b_type != Operand::kE4M3) continue;
    float amax = 0.0f;
    for (int64_t e = 0; e < p.k; ++e) {
      const float v = std::fabs(d[e]);
      if (v != std::numeric_limits<float>::infinity()) amax = std::fmax(amax, v);  // fmax ignores NaN
    }
    if (amax < 0x1p120f) {
      for (int64_t e = 0; e < p.k; ++e) d[e] *= kFp8DecodeUnit;  // exact
    } else {
      unit[i - i0] = kFp8DecodeUnit;
    }
  }
}

// Which of rows [j0, j0 + rows) of an FP8 B hold a NaN code (rare: a scan after a kernel saw one).
inline void mark_nan_rows(const GemmProblem& p, int64_t j0, int64_t rows, uint8_t* flags) {
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* src = row_ptr(p.b, p.b_type, j0 + r, p.ldb);
    bool nan = false;
    for (int64_t e = 0; e < p.k && !nan; ++e) nan = is_e4m3_nan(src[e]);
    flags[r] = nan ? 1 : 0;
  }
}

// Column blocks of the epilogue: a GEMV thread finalizes its outputs 64 columns at a time.
inline constexpr int64_t kEpilogueCols = 64;
// The GEMV's split of N between threads: 32 columns (a 64-byte line of 16-bit outputs), a
// multiple of every family's rows per call.
inline constexpr int64_t kGemvUnitCols = 32;

// Per-thread scratch of the epilogue, looked up once per task (thread_local lookups cost a call
// in position-independent code).
struct EpilogueScratch {
  float* sa;    // [rows]: block scales of the chunk, per row
  float* sb;    // [cols]: per column
  float* bias;  // [cols]
  float* y;     // [cols]
  static EpilogueScratch get(int64_t rows, int64_t cols) {
    return {scratch<10>(size_t(rows)), scratch<11>(size_t(cols)), scratch<12>(size_t(cols)), scratch<13>(size_t(cols))};
  }
};

// tot[i, j] joins the partials of chunk c for outputs (i0 + i, j0 + j), i < rows, j < cols;
// unit[i]: the power of two row i's partials still need (convert_a_rows). The same per-element
// arithmetic whichever loop order runs.
inline void combine_chunk(const GemmProblem& p, int64_t c, int64_t i0, int64_t rows, int64_t j0, int64_t cols,
                          const float* part, int64_t part_ld, float* tot, int64_t tot_ld, const float* unit,
                          const EpilogueScratch& s) {
  if (p.combine == Combine::kSum) {
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) tot[i * tot_ld + j] = tot[i * tot_ld + j] + part[i * part_ld + j] * unit[i];
    }
    return;
  }
  float* sa = s.sa;
  float* sb = s.sb;
  if (p.combine != Combine::kWeightBlock) {
    for (int64_t i = 0; i < rows; ++i) sa[i] = p.block_sa[a_row(p, i0 + i) * p.block_sa_row + c * p.block_sa_chunk];
  }
  for (int64_t j = 0; j < cols; ++j) sb[j] = p.block_sb[((j0 + j) / p.block_n) * p.block_sb_row + c * p.block_sb_chunk];
  auto run = [&](auto op) {
    if (cols >= 8 || cols >= rows) {  // contiguous columns innermost; a GEMV's few columns: rows
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < cols; ++j) {
          float& t = tot[i * tot_ld + j];
          t = op(t, part[i * part_ld + j] * unit[i], sa[i], sb[j]);  // * unit: exact, a power of two
        }
      }
    } else {
      for (int64_t j = 0; j < cols; ++j) {
        for (int64_t i = 0; i < rows; ++i) {
          float& t = tot[i * tot_ld + j];
          t = op(t, part[i * part_ld + j] * unit[i], sa[i], sb[j]);
        }
      }
    }
  };
  switch (p.combine) {
    case Combine::kScaledMmBlock: run([](float t, float v, float a, float b) { return t + (v * a) * b; }); break;
    case Combine::kMoeBlock: run([](float t, float v, float a, float b) { return std::fmaf(v * a, b, t); }); break;
    case Combine::kWeightBlock: run([](float t, float v, float, float b) { return t + v * b; }); break;
    case Combine::kSum: break;
  }
}

// y = final(tot) for outputs (i0 + i, j0 + j), rounded to out_dtype and stored; NaN where
// nan_cols[j] (a NaN code in that row of B).
inline void finalize(const GemmProblem& p, int64_t i0, int64_t rows, int64_t j0, int64_t cols, const float* tot,
                     int64_t tot_ld, const uint8_t* nan_cols, const EpilogueScratch& s) {
  float* bias = s.bias;
  float* y = s.y;
  switch (p.out_dtype) {  // the bias has the output's dtype
    case DType::kBF16:
      for (int64_t j = 0; j < cols; ++j) bias[j] = p.bias ? bf16_to_float(static_cast<const BFloat16*>(p.bias)[j0 + j]) : 0.0f;
      break;
    case DType::kF16:
      for (int64_t j = 0; j < cols; ++j) bias[j] = p.bias ? f16_to_float(static_cast<const Float16*>(p.bias)[j0 + j]) : 0.0f;
      break;
    default:
      for (int64_t j = 0; j < cols; ++j) bias[j] = p.bias ? static_cast<const float*>(p.bias)[j0 + j] : 0.0f;
      break;
  }
  const float* cs = p.col_scale != nullptr ? p.col_scale + j0 * p.col_scale_stride : nullptr;
  const int64_t css = p.col_scale_stride;
  const size_t out_size = p.out_dtype == DType::kF32 ? 4 : 2;
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t ra = a_row(p, i0 + i), ro = out_row(p, i0 + i);
    const float* t = tot + i * tot_ld;
    switch (p.final) {
      case Final::kScaledMm: {
        const float rs = p.row_scale[ra * p.row_scale_stride];
        for (int64_t j = 0; j < cols; ++j) y[j] = std::fmaf(rs, cs[j * css] * t[j], bias[j]);
        break;
      }
      case Final::kScale:
        if (cs != nullptr) {
          for (int64_t j = 0; j < cols; ++j) y[j] = t[j] * cs[j * css];
        } else {
          for (int64_t j = 0; j < cols; ++j) y[j] = t[j];
        }
        if (p.bias != nullptr) {
          for (int64_t j = 0; j < cols; ++j) y[j] = y[j] + bias[j];
        }
        break;
      case Final::kMoe: {
        for (int64_t j = 0; j < cols; ++j) y[j] = cs != nullptr ? t[j] * cs[j * css] : t[j];
        const float w = p.row_weight != nullptr ? p.row_weight[ro] : 1.0f;
        if (p.row_weight != nullptr) {
          for (int64_t j = 0; j < cols; ++j) y[j] = y[j] * w;
        }
        if (p.moe_sa != nullptr) {
          for (int64_t j = 0; j < cols; ++j) y[j] = y[j] * *p.moe_sa;
        }
        if (p.moe_sb != nullptr) {
          for (int64_t j = 0; j < cols; ++j) y[j] = y[j] * *p.moe_sb;
        }
        break;
      }
    }
    if (nan_cols != nullptr) {
      for (int64_t j = 0; j < cols; ++j) {
        if (nan_cols[j] != 0) y[j] = std::numeric_limits<float>::quiet_NaN();
      }
    }
    void* out_row_base = static_cast<uint8_t*>(p.out) + size_t(ro * p.ldc + j0) * out_size;
    switch (p.out_dtype) {
      case DType::kBF16: {
        auto* o = static_cast<BFloat16*>(out_row_base);
        for (int64_t j = 0; j < cols; ++j) o[j] = float_to_bf16(y[j]);
        break;
      }
      case DType::kF16: {
        auto* o = static_cast<Float16*>(out_row_base);
        for (int64_t j = 0; j < cols; ++j) o[j] = float_to_f16(y[j]);
        break;
      }
      default: std::memcpy(out_row_base, y, size_t(cols) * 4); break;
    }
  }
}

// --- GEMV: M <= 8 rows of A, weights streamed once -----------------------------------------------

struct GemvArgs {
  const void* a = nullptr;  // [M][lda] of the family's Elem from element k0, zeros past k
  int64_t lda = 0;
  const uint8_t* b = nullptr;  // R rows of B's operand type from element k0, row stride ldb_bytes
  int64_t ldb_bytes = 0;
  int64_t k = 0, chunk = 0;  // elements of this call (from k0), in chunks of `chunk` (the last may be short)
  float* partial = nullptr;  // [ceil(k / chunk)][M][R], decode domain
  bool nan_code = false;     // out: an FP8 NaN code was seen in one of the R rows
};
using GemvFn = void (*)(GemvArgs&);

// The GEMV's software prefetch, into L2. A call reads R rows side by side a step of `step` bytes
// each at a time: too many short streams for the hardware prefetcher (SmolLM2's FP8 rows are 9
// cache lines), so the loads stalled on DRAM. When the call's rows are whole rows of a contiguous
// matrix (weights as stored), its R rows are one block of memory and the next call's block
// follows it: the calls of a thread's columns read one stream, and each step prefetches that
// stream's next R x step bytes, kGemvPrefetchAhead past the step's own place in it (a 56 MB bf16
// [49152, 576] GEMV on one Zen 4 core: 13-15 GB/s with the per-row prefetch below, 23-26 GB/s
// so, a plain read 29-34). Otherwise (a K slice, strided B) each step prefetches the line
// kGemvRowPrefetchBytes further along each row, past the row's end in the rows R further on. A
// prefetch never faults: one past the matrix costs a wasted line at most (core/prefetch.h).
inline constexpr int64_t kGemvPrefetchAhead = 16384;
inline constexpr int64_t kGemvRowPrefetchBytes = 1024;

template <int R>
[[gnu::always_inline]] inline void gemv_prefetch(const GemvArgs& g, int64_t row_bytes, int64_t byte, int64_t step) {
  if (g.ldb_bytes == row_bytes) {
    const uint8_t* p = g.b + R * byte + kGemvPrefetchAhead;
    for (int64_t line = 0; line < R * step; line += 64) prefetch_l2(p + line);
    return;
  }
  for (int r = 0; r < R; ++r) {
    for (int64_t line = 0; line < step; line += 64) {
      const int64_t at = byte + line + kGemvRowPrefetchBytes;
      prefetch_l2(at < row_bytes ? g.b + r * g.ldb_bytes + at : g.b + (r + R) * g.ldb_bytes + (at - row_bytes));
    }
  }
}

// The f32 families' GEMV shapes: 8 independent accumulators at most (16 ymm registers).
inline int gemv_rows_per_call_8(int64_t m) { return m == 1 ? 8 : m == 2 ? 4 : m <= 4 ? 2 : 1; }

// K::gemv<M, R, B> for M rows of A and R rows of B: the shapes of gemv_rows_per_call_8 (R = 1
// for remainders), for the f32 families.
template <class K, Operand B>
GemvFn gemv_fn_8(int64_t m, int r) {
  switch (m * 16 + r) {
    case 1 * 16 + 8: return K::template gemv<1, 8, B>;
    case 1 * 16 + 1: return K::template gemv<1, 1, B>;
    case 2 * 16 + 4: return K::template gemv<2, 4, B>;
    case 2 * 16 + 1: return K::template gemv<2, 1, B>;
    case 3 * 16 + 2: return K::template gemv<3, 2, B>;
    case 3 * 16 + 1: return K::template gemv<3, 1, B>;
    case 4 * 16 + 2: return K::template gemv<4, 2, B>;
    case 4 * 16 + 1: return K::template gemv<4, 1, B>;
    case 5 * 16 + 1: return K::template gemv<5, 1, B>;
    case 6 * 16 + 1: return K::template gemv<6, 1, B>;
    case 7 * 16 + 1: return K::template gemv<7, 1, B>;
    case 8 * 16 + 1: return K::template gemv<8, 1, B>;
  }
  return nullptr;
}

template <class K>
GemvFn gemv_fn_8_any(Operand b, int64_t m, int r) {
  switch (b) {
    case Operand::kE4M3: return gemv_fn_8<K, Operand::kE4M3>(m, r);
    case Operand::kBF16: return gemv_fn_8<K, Operand::kBF16>(m, r);
    case Operand::kF16: return gemv_fn_8<K, Operand::kF16>(m, r);
    case Operand::kF32: return gemv_fn_8<K, Operand::kF32>(m, r);
  }
  return nullptr;
}

// The block combines of a GEMV: the partials of `chunks` chunks from c0 of M rows x `rows`
// columns (from column off of the block) joined into tot, with combine_chunk's arithmetic in its
// order (so the same bits), but with the rows of the block scales looked up once a block of
// columns (sa_row, sb_row) instead of once a chunk: a chunk of a 64-wide block is 64 weights a
// row, and the lookups (a 64-bit division a column) cost several times the kernel's work on it.
struct GemvBlockScales {
  const float* sa_row[kGemvMaxRows];  // A's block scales of row i (kWeightBlock: unused)
  const float* sb_row[kEpilogueCols];  // B's block scales of column j0 + j
};

template <Combine C>
inline float combine_one(float t, float v, float a, float b) {
  if constexpr (C == Combine::kScaledMmBlock) return t + (v * a) * b;
  if constexpr (C == Combine::kMoeBlock) return std::fmaf(v * a, b, t);
  return t + v * b;  // kWeightBlock
}

template <Combine C>
void combine_gemv_chunks(const GemmProblem& p, const GemvBlockScales& s, int64_t c0, int64_t chunks, int64_t off,
                         int64_t rows, const float* __restrict part, float* __restrict tot, int64_t cols,
                         const float* unit) {
  // The rows of one call share one row of B's scales unless they straddle a block of block_n.
  const bool one_sb = s.sb_row[off] == s.sb_row[off + rows - 1];
  for (int64_t c = 0; c < chunks; ++c) {
    const float* pc = part + c * p.m * rows;
    const int64_t cc = c0 + c;
    for (int64_t i = 0; i < p.m; ++i) {
      const float a = C == Combine::kWeightBlock ? 1.0f : s.sa_row[i][cc * p.block_sa_chunk];
      const float u = unit[i];  // * unit: exact, a power of two
      float* t = tot + i * cols + off;
      const float* v = pc + i * rows;
      if (one_sb && rows == 8) {  // the M = 1 GEMV's calls: a fixed count, which compilers vectorize whole
        const float b = s.sb_row[off][cc * p.block_sb_chunk];
        for (int j = 0; j < 8; ++j) t[j] = combine_one<C>(t[j], v[j] * u, a, b);
      } else if (one_sb) {
        const float b = s.sb_row[off][cc * p.block_sb_chunk];
        for (int64_t j = 0; j < rows; ++j) t[j] = combine_one<C>(t[j], v[j] * u, a, b);
      } else {
        for (int64_t j = 0; j < rows; ++j) t[j] = combine_one<C>(t[j], v[j] * u, a, s.sb_row[off + j][cc * p.block_sb_chunk]);
      }
    }
  }
}

// Columns [j0, j0 + cols) (cols <= kEpilogueCols) through gemv calls of r rows (single-row
// calls for a remainder), combined into one block of totals and finalized together.
// K is walked in slices of whole chunks whose activations (M x slice floats) stay in L1 while
// every weight row of the block passes: per output the chunks still combine in k order.
template <class K>
void gemv_columns(const GemmProblem& p, GemvFn group, GemvFn single, int r, int64_t j0, int64_t cols,
                  const typename K::Elem* a, int64_t lda, const float* unit, int64_t slice, float* partial, float* tot,
                  const EpilogueScratch& es) {
  const int64_t chunk = p.chunk();
  const int64_t elem = operand_size(p.b_type);
  std::fill(tot, tot + p.m * cols, 0.0f);
  uint8_t nan[kEpilogueCols] = {};
  bool any_nan = false;
  GemvBlockScales bs;
  if (p.combine != Combine::kSum) {
    for (int64_t i = 0; i < p.m; ++i) bs.sa_row[i] = p.block_sa + (p.block_sa ? a_row(p, i) * p.block_sa_row : 0);
    for (int64_t j = 0; j < cols; ++j) bs.sb_row[j] = p.block_sb + ((j0 + j) / p.block_n) * p.block_sb_row;
  }
  for (int64_t k0 = 0; k0 < p.k; k0 += slice) {
    GemvArgs g;
    g.a = a + k0;
    g.lda = lda;
    g.ldb_bytes = p.ldb * elem;
    g.k = std::min(slice, p.k - k0);
    g.chunk = chunk;
    g.partial = partial;
    const int64_t c0 = k0 / chunk, chunks = (g.k + chunk - 1) / chunk;
    for (int64_t off = 0; off < cols;) {
      const int rows = off + r <= cols ? r : 1;
      g.b = row_ptr(p.b, p.b_type, j0 + off, p.ldb) + k0 * elem;
      (rows == r ? group : single)(g);
      switch (p.combine) {
        case Combine::kSum:
          for (int64_t c = 0; c < chunks; ++c) {
            combine_chunk(p, c0 + c, 0, p.m, j0 + off, rows, partial + c * p.m * rows, rows, tot + off, cols, unit, es);
          }
          break;
        case Combine::kScaledMmBlock:
          combine_gemv_chunks<Combine::kScaledMmBlock>(p, bs, c0, chunks, off, rows, partial, tot, cols, unit);
          break;
        case Combine::kMoeBlock:
          combine_gemv_chunks<Combine::kMoeBlock>(p, bs, c0, chunks, off, rows, partial, tot, cols, unit);
          break;
        case Combine::kWeightBlock:
          combine_gemv_chunks<Combine::kWeightBlock>(p, bs, c0, chunks, off, rows, partial, tot, cols, unit);
          break;
      }
      if (g.nan_code) any_nan = true;
      off += rows;
    }
  }
  if (any_nan) mark_nan_rows(p, j0, cols, nan);
  finalize(p, 0, p.m, j0, cols, tot, cols, any_nan ? nan : nullptr, es);
}

template <class K>
void run_gemv(const GemmProblem& p, const GemmPlan& plan) {
  using Elem = typename K::Elem;
  const int64_t lda = padded_ld<K>(p.k);
  Elem* a = scratch<0, Elem>(size_t(p.m * lda));
  float* unit = scratch<6>(size_t(p.m));
  K::convert_a(p, 0, p.m, a, lda, unit);
  const int r = K::gemv_rows_per_call(p.m);
  const GemvFn group = K::gemv_fn(p.b_type, p.m, r), single = K::gemv_fn(p.b_type, p.m, 1);
  // N is split between the threads in units of kGemvUnitCols columns (whole cache lines of the
  // outputs), fine enough that the threads' shares of SmolLM2's 576 rows come out even.
  const int64_t units = (p.n + kGemvUnitCols - 1) / kGemvUnitCols;
  // A K slice of whole chunks with M x slice activations in at most 16 KiB (half of L1).
  const int64_t chunk = p.chunk();
  const int64_t slice = std::max<int64_t>(1, (int64_t(16384 / sizeof(Elem)) / p.m) / chunk) * chunk;
  // At least ~16 KiB of weights per chunk of the schedule.
  const int64_t grain =
      std::max<int64_t>(1, (int64_t(1) << 14) / std::max<int64_t>(1, kGemvUnitCols * p.k * operand_size(p.b_type)));
  parallel_for_at_most(plan.threads, units, grain, [&](int64_t u0, int64_t u1) {
    float* partial = scratch<1>(size_t((slice / chunk) * p.m * r));
    float* tot = scratch<2>(size_t(p.m * kEpilogueCols));
    const EpilogueScratch es = EpilogueScratch::get(p.m, kEpilogueCols);
    const int64_t j1 = std::min(p.n, u1 * kGemvUnitCols);
    for (int64_t j0 = u0 * kGemvUnitCols; j0 < j1; j0 += kEpilogueCols) {
      gemv_columns<K>(p, group, single, r, j0, std::min(kEpilogueCols, j1 - j0), a, lda, unit, slice, partial, tot, es);
    }
  });
}

// --- Panels: A rows reuse each decoded chunk of B ------------------------------------------------

struct TileArgs {
  const void* a = nullptr;  // kTileM rows of Elem, stride lda elements
  int64_t lda = 0;
  const void* b = nullptr;  // 4 rows of the decoded panel (Elem), stride ldb
  int64_t ldb = 0;
  int64_t len = 0;    // a multiple of kKAlign: ceil(len / chunk) chunks, the last possibly short
  int64_t chunk = 0;  // a multiple of kKAlign
  float* out = nullptr;  // chunk q's [kTileM][4] at out + q * chunk_stride, row stride ldo
  int64_t ldo = 0, chunk_stride = 0;
};

struct DecodeArgs {
  const uint8_t* b = nullptr;  // first row, stride ldb_bytes
  int64_t ldb_bytes = 0;
  int64_t rows = 0;
  int64_t len = 0;        // elements of each row from b
  void* dst = nullptr;    // [rows][ld] of Elem, zeros from len to round_up(len, kKAlign)
  int64_t ld = 0;
  uint8_t* nan = nullptr;  // [rows], OR-ed with 1 where a row holds an FP8 NaN code
};

// One task: rows [i0, i0 + rows) of A and [j0, j0 + cols) of B over all of K, in slices of whole
// chunks (about 512 of K) decoded once for every row of the task.
template <class K>
void panel_task(const GemmProblem& p, const typename K::Elem* a, int64_t lda, const float* unit, int64_t i0, int64_t rows,
                int64_t j0, int64_t cols) {
  using Elem = typename K::Elem;
  const int64_t chunk = p.chunk();
  const int64_t per_slice = std::max<int64_t>(1, 512 / chunk), slice = per_slice * chunk;
  const int64_t rows3 = round_up(rows, K::kTileM), cols4 = round_up(cols, 4);
  const int64_t ldbp = padded_ld<K>(std::min(slice, p.k));
  Elem* bp = scratch<3, Elem>(size_t(cols4 * ldbp));
  const int64_t part_chunk = rows3 * cols4;
  float* part = scratch<4>(size_t(per_slice * part_chunk));
  float* tot = scratch<5>(size_t(rows * cols4));
  std::fill(tot, tot + rows * cols4, 0.0f);
  const EpilogueScratch es = EpilogueScratch::get(rows, cols4);
  uint8_t nan[256] = {};
  std::fill(bp + cols * ldbp, bp + cols4 * ldbp, Elem{});  // padding rows of the panel
  for (int64_t k0 = 0; k0 < p.k; k0 += slice) {
    const int64_t len = std::min(slice, p.k - k0), len8 = round_up(len, K::kKAlign);
    DecodeArgs d;
    d.b = row_ptr(p.b, p.b_type, j0, p.ldb) + k0 * operand_size(p.b_type);
    d.ldb_bytes = p.ldb * operand_size(p.b_type);
    d.rows = cols;
    d.len = len;
    d.dst = bp;
    d.ld = ldbp;
    d.nan = nan;
    K::decode_b(p.b_type, d);
    for (int64_t jr = 0; jr < cols4; jr += 4) {
      for (int64_t ir = 0; ir < rows3; ir += K::kTileM) {
        TileArgs t;
        t.a = a + (i0 + ir) * lda + k0;
        t.lda = lda;
        t.b = bp + jr * ldbp;
        t.ldb = ldbp;
        t.len = len8;
        t.chunk = chunk;
        t.out = part + ir * cols4 + jr;
        t.ldo = cols4;
        t.chunk_stride = part_chunk;
        K::tile(t);
      }
    }
    for (int64_t q = 0; q * chunk < len; ++q) {
      combine_chunk(p, k0 / chunk + q, i0, rows, j0, cols, part + q * part_chunk, cols4, tot, cols4, unit + i0, es);
    }
  }
  bool any_nan = false;
  for (int64_t j = 0; j < cols; ++j) any_nan = any_nan || nan[j] != 0;
  finalize(p, i0, rows, j0, cols, tot, cols4, any_nan ? nan : nullptr, es);
}

template <class K>
void run_panel(const GemmProblem& p, const GemmPlan& plan) {
  using Elem = typename K::Elem;
  // kTileM - 1 zero rows past M: the last tile of a task may reach them.
  const int64_t lda = padded_ld<K>(p.k), extra = K::kTileM - 1;
  Elem* a = scratch<0, Elem>(size_t((p.m + extra) * lda));
  float* unit = scratch<6>(size_t(p.m));
  parallel_for_at_most(plan.threads, p.m, std::max<int64_t>(1, 8192 / lda),
                       [&](int64_t i0, int64_t i1) { K::convert_a(p, i0, i1, a + i0 * lda, lda, unit + i0); });
  std::fill(a + p.m * lda, a + (p.m + extra) * lda, Elem{});
  const int64_t pm = plan.panel_m, pn = std::min<int64_t>(plan.panel_n, 256);
  const int64_t mt = (p.m + pm - 1) / pm, nt = (p.n + pn - 1) / pn;
  parallel_for_at_most(plan.threads, mt * nt, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t ib = t / nt, jb = t % nt;
      const int64_t i0 = ib * pm, j0 = jb * pn;
      panel_task<K>(p, a, lda, unit, i0, std::min(pm, p.m - i0), j0, std::min(pn, p.n - j0));
    }
  });
}

template <class K>
void run_gemm(const GemmProblem& p, const GemmPlan& plan) {
  if (plan.shape == GemmShape::kGemv) {
    run_gemv<K>(p, plan);
  } else {
    run_panel<K>(p, plan);
  }
}

}  // namespace
}  // namespace fp8kit::ops::cpu
