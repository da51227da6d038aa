// paged_attention on the CPU, read mode kFp8Compute (FlashAttention-3's all-FP8 path): against a
// double-precision emulation written here from the header's formula (q8 through fp8.h, raw e4m3
// K/V from the cache bytes, exact FP8 dots, P~ = 2^(x - max + 8), P8 = e4m3(P~), O = acc / l * v_scale)
// within a bound that covers the op's f32 arithmetic, including a P8 code that an f32 P~ may
// round to the neighbour of; and its error against exact attention on the dequantized cache
// (the quality a future FP8 tensor-core kernel is held to).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>

#include "expect_error.h"
#include "paged_attention_test_util.h"

namespace fp8kit {
namespace {

using attention_test::Bench;
using attention_test::Problem;
using attention_test::SeqSpec;
using ops::KvCacheDtype;

double e4m3(double x) { return double(e4m3fn_bits_to_float(float_to_e4m3fn_bits(float(x)))); }

// The e4m3 byte of key/value j, head h, element d of sequence r, from the cache image.
uint8_t cache_byte(const Bench& b, const Tensor& cache, int64_t r, int64_t j, int64_t h, int64_t d) {
  const int64_t B = b.p.block_size;
  const int64_t block = b.md.block_table.data<int32_t>()[r * b.md.block_table.stride(0) + j / B];
  return cache.data<uint8_t>()[((block * B + j % B) * b.p.num_kv_heads + h) * b.p.head_size + d];
}

struct Emulated {
  std::vector<double> out, tol;
  std::vector<double> f32_bound;  // tol before the final rounding
};

Emulated emulate(const Bench& b, const std::vector<float>& q_scale) {
  const auto& p = b.p;
  const int64_t H = p.num_heads, Hkv = p.num_kv_heads, D = p.head_size, G = H / Hkv;
  const double u = std::ldexp(1.0, -24), log2e = 1.4426950408889634, ln2 = 0.6931471805599453;
  const float scale = p.options.scale.value_or(float(std::pow(double(D), -0.5)));
  const double c = p.options.softcap;
  Emulated e;
  e.out.assign(size_t(b.num_tokens() * H * D), 0.0);
  e.tol.assign(e.out.size(), 0.0);
  e.f32_bound.assign(e.out.size(), 0.0);
  int64_t row0 = 0;
  for (size_t r = 0; r < p.seqs.size(); ++r) {
    const int64_t q_len = p.seqs[r].q_len, L = p.seqs[r].ctx + q_len;
    const auto mask = attention_test::mask_matrix(q_len, L, p.options);
    for (int64_t i = 0; i < q_len; ++i) {
      const int64_t t = row0 + i;
      for (int64_t h = 0; h < H; ++h) {
        const int64_t g = h / G;
        const float qs = q_scale[q_scale.size() == 1 ? 0 : size_t(g)];
        const float ks = b.ks[b.ks.size() == 1 ? 0 : size_t(g)], vs = b.vs[b.vs.size() == 1 ? 0 : size_t(g)];
        std::vector<double> q8(static_cast<size_t>(D));
        for (int64_t d = 0; d < D; ++d) {
          const float y = b.q_values[size_t((t * H + h) * D + d)] * (1.0f / qs);
          q8[size_t(d)] = e4m3(std::fmax(-448.0f, std::fmin(y, 448.0f)));
        }
        const double alpha = double((scale * qs) * ks);
        std::vector<double> x(static_cast<size_t>(L)), dx(static_cast<size_t>(L));
        double mx = -INFINITY;
        for (int64_t j = 0; j < L; ++j) {
          if (!mask[size_t(i)][size_t(j)]) continue;
          double raw = 0, raw_abs = 0;  // exact: FP8 products and their sums fit a double
          for (int64_t d = 0; d < D; ++d) {
            const double k8 = e4m3fn_bits_to_float(cache_byte(b, b.expected_key_cache, int64_t(r), j, g, d));
            raw += q8[size_t(d)] * k8;
            raw_abs += std::fabs(q8[size_t(d)] * k8);
          }
          double s = raw * alpha;
          if (c > 0) s = c * std::tanh(s / c);
          x[size_t(j)] = s * log2e;
          dx[size_t(j)] = log2e * alpha * double(D + 1) * u * raw_abs + 6 * u * (std::fabs(x[size_t(j)]) + 1);
          mx = std::max(mx, x[size_t(j)]);
        }
        double dx_max = 0;
        for (int64_t j = 0; j < L; ++j) {
          if (mask[size_t(i)][size_t(j)] && x[size_t(j)] == mx) dx_max = std::max(dx_max, dx[size_t(j)]);
        }
        double l = 0, max_rel = 0;
        int64_t visible = 0;
        std::vector<double> p8(static_cast<size_t>(L), 0.0), flip(static_cast<size_t>(L), 0.0);
        for (int64_t j = 0; j < L; ++j) {
          if (!mask[size_t(i)][size_t(j)]) continue;
          const double pj = std::exp2(x[size_t(j)] - mx + 8.0);
          const double rel = ln2 * (dx[size_t(j)] + dx_max + u * (std::fabs(x[size_t(j)] - mx) + 16)) + 2 * u;
          l += pj;
          ++visible;
          max_rel = std::max(max_rel, rel);
          p8[size_t(j)] = e4m3(pj);
          // The op's f32 P~ lies within rel of pj: every e4m3 code it may round to.
          const double lo = e4m3(pj * (1 - rel)), hi = e4m3(pj * (1 + rel));
          flip[size_t(j)] = std::max(hi - p8[size_t(j)], p8[size_t(j)] - lo);
        }
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0, acc_abs = 0, flips = 0;
          for (int64_t j = 0; j < L; ++j) {
            if (!mask[size_t(i)][size_t(j)]) continue;
            const double v8 = e4m3fn_bits_to_float(cache_byte(b, b.expected_value_cache, int64_t(r), j, g, d));
            acc += p8[size_t(j)] * v8;
            acc_abs += std::fabs(p8[size_t(j)] * v8);
            flips += flip[size_t(j)] * std::fabs(v8);
          }
          const double o = acc / l * double(vs);
          const double bound = double(vs) / l * (flips + double(visible + 2) * u * acc_abs) +
                               std::fabs(o) * (double(visible + 5) * u + max_rel);
          const size_t at = size_t((t * H + h) * D + d);
          e.out[at] = o;
          e.f32_bound[at] = bound;
          e.tol[at] = bound + ops_test::ulp_of(std::fabs(o) + bound, p.dtype) / 2;
        }
      }
    }
    row0 += q_len;
  }
  return e;
}

struct Fp8Run {
  std::vector<float> out;
  double worst_ratio = 0;
  double worst_f32_ratio = 0;  // f32 outputs: |error| / bound before the final rounding
  double rel_l2_vs_exact = 0;  // against exact attention on the dequantized cache, q unquantized
};

Fp8Run run_fp8(const Problem& base, const std::vector<float>& q_scale) {
  Problem p = base;
  p.options.read_mode = ops::AttentionReadMode::kFp8Compute;
  p.options.q_scale = Tensor::from_vector(q_scale);
  Bench b = attention_test::build(p);
  SCOPED_TRACE(p.describe());
  ForwardContext ctx;
  const Tensor out = ops::paged_attention(ctx, b.q, b.k, b.v, b.cache, b.md, p.options);
  EXPECT_EQ(std::memcmp(b.cache.key_cache.data_ptr(), b.expected_key_cache.data_ptr(), b.cache.key_cache.nbytes()), 0);
  Fp8Run run;
  run.out = ops_test::to_floats(out);
  const Emulated e = emulate(b, q_scale);
  const attention_test::Expected exact = attention_test::dense_reference(b);
  int64_t failures = 0;
  double num = 0, den = 0;
  for (size_t i = 0; i < run.out.size(); ++i) {
    const double err = std::fabs(double(run.out[i]) - e.out[i]);
    if (!(err <= e.tol[i]) && failures++ < 5) {
      ADD_FAILURE() << "out[" << i << "] = " << run.out[i] << ", emulation " << e.out[i] << " +- " << e.tol[i];
    }
    if (e.tol[i] > 0) run.worst_ratio = std::max(run.worst_ratio, err / e.tol[i]);
    if (p.dtype == DType::kF32 && e.f32_bound[i] > 0)
      run.worst_f32_ratio = std::max(run.worst_f32_ratio, err / e.f32_bound[i]);
    num += (double(run.out[i]) - exact.out[i]) * (double(run.out[i]) - exact.out[i]);
    den += exact.out[i] * exact.out[i];
  }
  EXPECT_EQ(failures, 0);
  run.rel_l2_vs_exact = den > 0 ? std::sqrt(num / den) : 0;
  return run;
}

TEST(PagedAttentionFp8, MatchesTheEmulationAndBoundsTheError) {
  double worst = 0, worst_f32 = 0, worst_rel = 0;
  for (DType dt : ops_test::kFloatDTypes) {
    for (bool per_head : {false, true}) {
      Problem p;
      p.seqs = {{0, 7}, {13, 1}, {16, 5}, {5, 16}, {0, 1}, {29, 17}};
      p.dtype = dt;
      p.cache_dtype = KvCacheDtype::kFp8E4M3;
      p.per_head_scales = per_head;
      p.seed = 200 + uint32_t(dt) + (per_head ? 7 : 0);
      const std::vector<float> qs = per_head ? std::vector<float>{0.008f, 0.012f} : std::vector<float>{0.01f};
      const Fp8Run r = run_fp8(p, qs);
      worst = std::max(worst, r.worst_ratio);
      worst_f32 = std::max(worst_f32, r.worst_f32_ratio);
      worst_rel = std::max(worst_rel, r.rel_l2_vs_exact);
      // FP8 Q, K, V and P against exact attention: e4m3 keeps 3 mantissa bits (2^-4 relative
      // half-step); the averaging over keys brings the output error well below that.
      EXPECT_LT(r.rel_l2_vs_exact, 0.08);
    }
  }
  std::printf(
      "[ calib    ] fp8 compute vs the emulation: max |error| / tolerance = %.3g, f32 outputs: max |error| / "
      "f32 bound = %.3g; relative L2 vs exact attention = %.4f\n",
      worst, worst_f32, worst_rel);
}

TEST(PagedAttentionFp8, GqaWindowsSoftcapAndHeadSizes) {
  for (auto [h, hkv, d] : {std::tuple{4, 4, 64}, std::tuple{8, 1, 128}, std::tuple{4, 2, 5}}) {
    Problem p;
    p.seqs = {{9, 3}, {0, 5}, {20, 1}};
    p.num_heads = h, p.num_kv_heads = hkv, p.head_size = d;
    p.block_size = 3;
    p.cache_dtype = KvCacheDtype::kFp8E4M3;
    p.options.window_left = 4;
    p.options.window_right = 0;
    p.options.softcap = 3.0f;
    p.q_sigma = 3.0f;
    p.seed = 300 + uint32_t(d);
    run_fp8(p, {0.03f});
  }
}

TEST(PagedAttentionFp8, DiffersFromTheDequantizeMode) {
  Problem p;
  p.seqs = {{13, 3}};
  p.cache_dtype = KvCacheDtype::kFp8E4M3;
  p.dtype = DType::kF32;
  ForwardContext ctx;
  Bench a = attention_test::build(p), c = attention_test::build(p);
  ops::PagedAttentionOptions o = p.options;
  o.read_mode = ops::AttentionReadMode::kFp8Compute;
  o.q_scale = Tensor::from_vector<float>({0.01f});
  const auto fp8 = ops_test::to_floats(ops::paged_attention(ctx, a.q, a.k, a.v, a.cache, a.md, o));
  const auto deq = ops_test::to_floats(ops::paged_attention(ctx, c.q, c.k, c.v, c.cache, c.md, p.options));
  int64_t differ = 0;
  for (size_t i = 0; i < fp8.size(); ++i) differ += fp8[i] != deq[i];
  EXPECT_GT(differ, int64_t(fp8.size()) / 2);
}

TEST(PagedAttentionFp8, NaNQueryElementsQuantizeToMax) {
  // vLLM's static query quantization clamps with fminf/fmaxf: a NaN becomes +448, exactly what
  // a huge value gives.
  Problem p;
  p.seqs = {{5, 2}};
  p.cache_dtype = KvCacheDtype::kFp8E4M3;
  p.options.read_mode = ops::AttentionReadMode::kFp8Compute;
  p.options.q_scale = Tensor::from_vector<float>({0.01f});
  ForwardContext ctx;
  std::vector<float> outs[2];
  for (int k = 0; k < 2; ++k) {
    Bench b = attention_test::build(p);
    Tensor flat = Tensor::from_storage(b.q.storage(), {int64_t(b.q.storage()->nbytes() / 2)}, {1}, 0, p.dtype);
    ops_test::set_element(flat, 3, k == 0 ? std::numeric_limits<float>::quiet_NaN() : 1e30f);
    outs[k] = ops_test::to_floats(ops::paged_attention(ctx, b.q, b.k, b.v, b.cache, b.md, p.options));
  }
  for (size_t i = 0; i < outs[0].size(); ++i) {
    ASSERT_TRUE(std::isfinite(outs[0][i]));
    ASSERT_EQ(outs[0][i], outs[1][i]);
  }
}

}  // namespace
}  // namespace fp8kit
