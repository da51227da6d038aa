// The portable kernel family of the CPU GEMM engine: plain C++ over 8-lane arrays that the
// compiler vectorizes for the build's baseline (SSE2 on x86-64, NEON on AArch64); products and
// sums are separate roundings (no FMA contraction: -ffp-contract=off). FP8 weights go through a
// 256-entry table. Serves machines without AVX2 and is tested on every machine by forcing it
// (tests/cpu/test_gemm_cpu.cpp). Loops: gemm_cpu_driver.h.
#include "ops/gemm/gemm_cpu_driver.h"
#include "ops/gemm/gemm_cpu_families.h"

namespace fp8kit::ops::cpu {
namespace {

struct PortableKernels {
  using Elem = float;
  static constexpr int64_t kKAlign = 8;
  static constexpr int kTileM = 3;
  static void convert_a(const GemmProblem& p, int64_t i0, int64_t i1, float* dst, int64_t ld, float* unit) {
    convert_a_rows(p, i0, i1, dst, ld, unit);
  }
  static int gemv_rows_per_call(int64_t m) { return gemv_rows_per_call_8(m); }
  static GemvFn gemv_fn(Operand b, int64_t m, int r) { return gemv_fn_8_any<PortableKernels>(b, m, r); }

  // 8 elements [kk, kk + 8) of a B row in the decode domain; zeros past `valid`.
  template <Operand B>
  static void decode8(const uint8_t* row, int64_t kk, int64_t valid, float* w, bool& nan) {
    for (int l = 0; l < 8; ++l) {
      if (l < valid) {
        w[l] = decode_b_element(row, B, kk + l);
        if (B == Operand::kE4M3) nan = nan || is_e4m3_nan(row[kk + l]);
      } else {
        w[l] = 0.0f;
      }
    }
  }

  template <int M, int R, Operand B>
  static void gemv(GemvArgs& g) {
    float* partial = g.partial;
    bool nan = false;
    for (int64_t k0 = 0; k0 < g.k; k0 += g.chunk) {
      const int64_t k1 = std::min(g.k, k0 + g.chunk);
      float acc[M][R][8] = {};
      for (int64_t kk = k0; kk < k1; kk += 8) {
        for (int r = 0; r < R; ++r) {
          float w[8];
          decode8<B>(g.b + r * g.ldb_bytes, kk, std::min<int64_t>(8, k1 - kk), w, nan);
          for (int m = 0; m < M; ++m) {
            const float* am = static_cast<const float*>(g.a) + m * g.lda + kk;
            for (int l = 0; l < 8; ++l) acc[m][r][l] = acc[m][r][l] + w[l] * am[l];
          }
        }
      }
      for (int m = 0; m < M; ++m) {
        for (int r = 0; r < R; ++r) *partial++ = lane_tree(acc[m][r]);
      }
    }
    g.nan_code = nan;
  }

  static void tile(const TileArgs& t) {
    float* out = t.out;
    for (int64_t c0 = 0; c0 < t.len; c0 += t.chunk, out += t.chunk_stride) {
      const int64_t c1 = std::min(t.len, c0 + t.chunk);
      float acc[3][4][8] = {};
      for (int64_t kk = c0; kk < c1; kk += 8) {
        for (int j = 0; j < 4; ++j) {
          const float* bj = static_cast<const float*>(t.b) + j * t.ldb + kk;
          for (int i = 0; i < 3; ++i) {
            const float* ai = static_cast<const float*>(t.a) + i * t.lda + kk;
            for (int l = 0; l < 8; ++l) acc[i][j][l] = acc[i][j][l] + bj[l] * ai[l];
          }
        }
      }
      for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 4; ++j) out[i * t.ldo + j] = lane_tree(acc[i][j]);
      }
    }
  }

  static void decode_b(Operand type, const DecodeArgs& d) {
    const int64_t len8 = round_up(d.len, 8);
    for (int64_t r = 0; r < d.rows; ++r) {
      const uint8_t* row = d.b + r * d.ldb_bytes;
      float* dst = static_cast<float*>(d.dst) + r * d.ld;
      bool nan = false;
      for (int64_t e = 0; e < d.len; ++e) dst[e] = decode_b_element(row, type, e);
      if (type == Operand::kE4M3) {
        for (int64_t e = 0; e < d.len; ++e) nan = nan || is_e4m3_nan(row[e]);
      }
      for (int64_t e = d.len; e < len8; ++e) dst[e] = 0.0f;
      if (nan) d.nan[r] = 1;
    }
  }
};

}  // namespace

void run_gemm_portable(const GemmProblem& problem, const GemmPlan& plan) { run_gemm<PortableKernels>(problem, plan); }

}  // namespace fp8kit::ops::cpu
