// The double-precision emulation of paged_attention's kFp8Compute read mode (FlashAttention-3's
// all-FP8 path) and its bound, shared by the CPU test (test_paged_attention_fp8.cpp) and the GPU
// test (tests/gpu/test_attention_cuda.cpp): q8 through fp8.h, raw e4m3 K/V from the cache bytes,
// exact FP8 dots, P~ = 2^(x - max + 8), P8 = e4m3(P~), O = acc / l * v_scale, within a bound that
// covers the op's f32 arithmetic, including a P8 code that an f32 P~ may round to the neighbour
// of. exp_error_u: the error of the op's exp2 in units of u = 2^-24 (relative).
#pragma once

#include <cmath>
#include <vector>

#include "paged_attention_test_util.h"

namespace fp8kit::attention_test {

inline double e4m3(double x) { return double(e4m3fn_bits_to_float(float_to_e4m3fn_bits(float(x)))); }

// The e4m3 byte of key/value j, head h, element d of sequence r, from the cache image.
inline uint8_t cache_byte(const Bench& b, const Tensor& cache, int64_t r, int64_t j, int64_t h, int64_t d) {
  const int64_t B = b.p.block_size;
  const int64_t block = b.md.block_table.data<int32_t>()[r * b.md.block_table.stride(0) + j / B];
  return cache.data<uint8_t>()[((block * B + j % B) * b.p.num_kv_heads + h) * b.p.head_size + d];
}

struct Emulated {
  std::vector<double> out, tol;
  std::vector<double> f32_bound;  // tol before the final rounding
};

inline Emulated emulate(const Bench& b, const std::vector<float>& q_scale, double exp_error_u = 2.0) {
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
          const double rel = ln2 * (dx[size_t(j)] + dx_max + u * (std::fabs(x[size_t(j)] - mx) + 16)) + exp_error_u * u;
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

}  // namespace fp8kit::attention_test
