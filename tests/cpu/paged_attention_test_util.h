// Test bench of paged_attention (test_paged_attention*.cpp): builds a batch (sequences of given
// ctx / q_len, random block placement, caches poisoned everywhere no visible key lives), writes
// the context tokens into the cache itself (with fp8.h for an FP8 cache), and keeps the
// dequantized K/V of every position in double. The direct reference gathers those into dense
// [L, Hkv, D] arrays, materializes the mask matrix from FlashAttention's bottom-right
// convention (col <= row + L - q_len, window (left, right)), and does a full softmax in double.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "fp8kit/fp8.h"
#include "fp8kit/ops/attention.h"
#include "ops_test_util.h"

namespace fp8kit::attention_test {

using ops::KvCacheDtype;

struct SeqSpec {
  int64_t ctx = 0, q_len = 0;
};

struct Problem {
  std::vector<SeqSpec> seqs;
  int64_t num_heads = 8, num_kv_heads = 2, head_size = 64, block_size = 16;
  DType dtype = DType::kBF16;
  KvCacheDtype cache_dtype = KvCacheDtype::kAuto;
  bool per_head_scales = false;
  int64_t padding_rows = 0;  // q rows past the last sequence (slot -1)
  float q_sigma = 1.0f, kv_sigma = 1.0f;
  uint32_t seed = 1;
  ops::PagedAttentionOptions options;
  std::string describe() const {
    std::string s = std::string(dtype_name(dtype)) + " cache " + ops::kv_cache_dtype_name(cache_dtype) + " H " +
                    std::to_string(num_heads) + " Hkv " + std::to_string(num_kv_heads) + " D " +
                    std::to_string(head_size) + " B " + std::to_string(block_size) + " seqs";
    for (const auto& q : seqs) s += " (" + std::to_string(q.ctx) + "," + std::to_string(q.q_len) + ")";
    return s + " seed " + std::to_string(seed);
  }
};

// Everything one call needs, plus the dense truth.
struct Bench {
  Problem p;
  Tensor q, k, v;  // q [T, H, D] and k/v [T_new, Hkv, D] are strided views of wider buffers
  ops::PagedKvCache cache;
  ops::AttentionMetadata md;
  Tensor expected_key_cache, expected_value_cache;  // cache memory after the store
  // dense[r][(j * Hkv + h) * D + d]: the value attention must see for key/value j of sequence r.
  std::vector<std::vector<double>> key_dense, value_dense;
  std::vector<float> q_values;  // [T, H, D], as q holds them
  std::vector<float> ks, vs;    // the scales

  int64_t num_tokens() const { return q.size(0); }
  int64_t real_tokens() const {
    int64_t n = 0;
    for (const auto& s : p.seqs) n += s.q_len;
    return n;
  }
};

inline uint8_t encode_cache(float x, float scale, KvCacheDtype dt) {
  return dt == KvCacheDtype::kFp8E5M2 ? float_to_e5m2_bits(x / scale) : float_to_e4m3fn_bits(x / scale);
}
inline double decode_cache(uint8_t b, KvCacheDtype dt) {
  return dt == KvCacheDtype::kFp8E5M2 ? double(e5m2_bits_to_float(b)) : double(e4m3fn_bits_to_float(b));
}

inline Bench build(const Problem& p) {
  Bench b;
  b.p = p;
  const int64_t H = p.num_heads, Hkv = p.num_kv_heads, D = p.head_size, B = p.block_size;
  const int64_t R = int64_t(p.seqs.size());
  const bool fp8 = p.cache_dtype != KvCacheDtype::kAuto;
  std::mt19937 gen(p.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);

  // Blocks: each sequence gets ceil(L / B) of them, placed at random among two spare ones.
  std::vector<int64_t> lens, blocks_of;
  int64_t total_blocks = 2, max_blocks = 1;
  for (const auto& s : p.seqs) {
    lens.push_back(s.ctx + s.q_len);
    blocks_of.push_back((lens.back() + B - 1) / B);
    total_blocks += blocks_of.back();
    max_blocks = std::max(max_blocks, blocks_of.back());
  }
  std::vector<int32_t> ids(static_cast<size_t>(total_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), gen);
  std::vector<int32_t> table(size_t(R * (max_blocks + 1)), 999999);  // one spare column, a stride != width
  int64_t next = 0;
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t j = 0; j < blocks_of[size_t(r)]; ++j) table[size_t(r * (max_blocks + 1) + j)] = ids[size_t(next++)];
  }
  Tensor table_t = Tensor::from_vector(table, {R, max_blocks + 1});
  b.md.block_table = table_t.narrow(1, 0, max_blocks);

  // Caches: NHD, poisoned (NaN elements, or the FP8 NaN byte 0x7F).
  const DType cache_type = fp8 ? DType::kU8 : p.dtype;
  b.cache.dtype = p.cache_dtype;
  b.cache.key_cache = Tensor::empty({total_blocks, B, Hkv, D}, cache_type);
  b.cache.value_cache = Tensor::empty({total_blocks, B, Hkv, D}, cache_type);
  for (Tensor* c : {&b.cache.key_cache, &b.cache.value_cache}) {
    if (fp8) {
      c->fill_bytes_(0x7F);
    } else {
      for (int64_t i = 0; i < c->numel(); ++i) ops_test::set_element(*c, i, std::nanf(""));
    }
  }
  b.ks = {0.02f}, b.vs = {0.015f};
  if (p.per_head_scales) {
    b.ks.clear(), b.vs.clear();
    for (int64_t h = 0; h < Hkv; ++h)
      b.ks.push_back(0.01f + 0.007f * float(h)), b.vs.push_back(0.03f - 0.002f * float(h));
  }
  b.cache.k_scale = Tensor::from_vector(b.ks);
  b.cache.v_scale = Tensor::from_vector(b.vs);

  // Positions: the cache image and the dense truth. Context tokens are written here; new tokens
  // come as k/v rows and their bytes are what the op must store.
  const int64_t T_new = b.real_tokens();
  const int64_t T = T_new + p.padding_rows;
  const int64_t kv_width = 3 * Hkv * D;  // k, v and a spare head group: rows of a fused buffer
  std::vector<float> kv_rows(size_t(std::max<int64_t>(T, 1) * kv_width), std::nanf(""));
  b.key_dense.resize(size_t(R));
  b.value_dense.resize(size_t(R));
  b.expected_key_cache = b.cache.key_cache.clone();
  b.expected_value_cache = b.cache.value_cache.clone();
  std::vector<int64_t> slots(size_t(T), -1);
  std::vector<int32_t> qsl{0};
  int64_t row = 0;
  for (int64_t r = 0; r < R; ++r) {
    const int64_t L = lens[size_t(r)];
    b.key_dense[size_t(r)].assign(size_t(L * Hkv * D), 0.0);
    b.value_dense[size_t(r)].assign(size_t(L * Hkv * D), 0.0);
    for (int64_t j = 0; j < L; ++j) {
      const int64_t block = table[size_t(r * (max_blocks + 1) + j / B)];
      const bool is_new = j >= p.seqs[size_t(r)].ctx;
      if (is_new) slots[size_t(row)] = block * B + j % B;
      for (int64_t h = 0; h < Hkv; ++h) {
        for (int64_t d = 0; d < D; ++d) {
          const float kx = ops_test::round_to(p.kv_sigma * normal(gen), p.dtype);
          const float vx = ops_test::round_to(p.kv_sigma * normal(gen), p.dtype);
          const int64_t at = ((block * B + j % B) * Hkv + h) * D + d;
          const size_t dense_at = size_t((j * Hkv + h) * D + d);
          const float sk = b.ks[b.ks.size() == 1 ? 0 : size_t(h)], sv = b.vs[b.vs.size() == 1 ? 0 : size_t(h)];
          if (fp8) {
            const uint8_t kb = encode_cache(kx, sk, p.cache_dtype), vb = encode_cache(vx, sv, p.cache_dtype);
            b.key_dense[size_t(r)][dense_at] = decode_cache(kb, p.cache_dtype) * double(sk);
            b.value_dense[size_t(r)][dense_at] = decode_cache(vb, p.cache_dtype) * double(sv);
            b.expected_key_cache.data<uint8_t>()[at] = kb;
            b.expected_value_cache.data<uint8_t>()[at] = vb;
            if (!is_new) b.cache.key_cache.data<uint8_t>()[at] = kb, b.cache.value_cache.data<uint8_t>()[at] = vb;
          } else {
            b.key_dense[size_t(r)][dense_at] = kx;
            b.value_dense[size_t(r)][dense_at] = vx;
            ops_test::set_element(b.expected_key_cache, at, kx);
            ops_test::set_element(b.expected_value_cache, at, vx);
            if (!is_new)
              ops_test::set_element(b.cache.key_cache, at, kx), ops_test::set_element(b.cache.value_cache, at, vx);
          }
          if (is_new) {
            kv_rows[size_t(row * kv_width + h * D + d)] = kx;
            kv_rows[size_t(row * kv_width + (Hkv + h) * D + d)] = vx;
          }
        }
      }
      if (is_new) ++row;
    }
    qsl.push_back(int32_t(row));
  }
  Tensor kv_buf = ops_test::make_tensor(kv_rows, {std::max<int64_t>(T, 1), kv_width}, p.dtype);
  b.k = Tensor::from_storage(kv_buf.storage(), {T, Hkv, D}, {kv_width, D, 1}, 0, p.dtype);
  b.v = Tensor::from_storage(kv_buf.storage(), {T, Hkv, D}, {kv_width, D, 1}, Hkv * D, p.dtype);
  b.md.slot_mapping = Tensor::from_vector(slots);
  b.md.query_start_loc = Tensor::from_vector(qsl);
  std::vector<int32_t> lens32(lens.begin(), lens.end());
  b.md.seq_lens = Tensor::from_vector(lens32, {R});

  // q [T, H, D] as a view with a padded token stride.
  const int64_t q_stride = H * D + 3;
  std::vector<float> q_buf(size_t(std::max<int64_t>(T, 1) * q_stride), std::nanf(""));
  b.q_values.assign(size_t(T * H * D), 0.0f);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < H * D; ++i) {
      const float x = ops_test::round_to(p.q_sigma * normal(gen), p.dtype);
      q_buf[size_t(t * q_stride + i)] = x;
      b.q_values[size_t(t * H * D + i)] = x;
    }
  }
  Tensor q_t = ops_test::make_tensor(q_buf, {std::max<int64_t>(T, 1), q_stride}, p.dtype);
  b.q = Tensor::from_storage(q_t.storage(), {T, H, D}, {q_stride, D, 1}, 0, p.dtype);
  return b;
}

// Overwrites element (position j, KV head h, d) of sequence r's cached K and V (a context token)
// in the cache and in the dense truth: x as the dtype holds it, or its FP8 byte.
inline void set_cached(Bench& b, int64_t r, int64_t j, int64_t h, int64_t d, float key, float value) {
  const auto& p = b.p;
  ASSERT_LT(j, p.seqs[size_t(r)].ctx) << "set_cached writes context tokens only";
  const int64_t B = p.block_size, Hkv = p.num_kv_heads, D = p.head_size;
  const int64_t block = b.md.block_table.data<int32_t>()[r * b.md.block_table.stride(0) + j / B];
  const int64_t at = ((block * B + j % B) * Hkv + h) * D + d;
  const size_t dense_at = size_t((j * Hkv + h) * D + d);
  if (p.cache_dtype == KvCacheDtype::kAuto) {
    for (Tensor* c : {&b.cache.key_cache, &b.expected_key_cache}) ops_test::set_element(*c, at, key);
    for (Tensor* c : {&b.cache.value_cache, &b.expected_value_cache}) ops_test::set_element(*c, at, value);
    b.key_dense[size_t(r)][dense_at] = ops_test::round_to(key, p.dtype);
    b.value_dense[size_t(r)][dense_at] = ops_test::round_to(value, p.dtype);
    return;
  }
  const float sk = b.ks[b.ks.size() == 1 ? 0 : size_t(h)], sv = b.vs[b.vs.size() == 1 ? 0 : size_t(h)];
  const uint8_t kb = encode_cache(key, sk, p.cache_dtype), vb = encode_cache(value, sv, p.cache_dtype);
  b.cache.key_cache.data<uint8_t>()[at] = b.expected_key_cache.data<uint8_t>()[at] = kb;
  b.cache.value_cache.data<uint8_t>()[at] = b.expected_value_cache.data<uint8_t>()[at] = vb;
  b.key_dense[size_t(r)][dense_at] = decode_cache(kb, p.cache_dtype) * double(sk);
  b.value_dense[size_t(r)][dense_at] = decode_cache(vb, p.cache_dtype) * double(sv);
}

// mask[i][j] of one sequence, from FlashAttention's convention: with sk = L and sq = q_len, row i
// sees col j iff (not causal or j <= i + sk - sq) and (left < 0 or j >= i + sk - sq - left) and
// (right < 0 or j <= i + sk - sq + right).
inline std::vector<std::vector<bool>> mask_matrix(int64_t q_len, int64_t L, const ops::PagedAttentionOptions& o) {
  std::vector<std::vector<bool>> m(size_t(q_len), std::vector<bool>(size_t(L), false));
  for (int64_t i = 0; i < q_len; ++i) {
    const int64_t diag = i + L - q_len;
    for (int64_t j = 0; j < L; ++j) {
      bool ok = !o.causal || j <= diag;
      if (o.window_left >= 0 && j < diag - o.window_left) ok = false;
      if (o.window_right >= 0 && j > diag + o.window_right) ok = false;
      m[size_t(i)][size_t(j)] = ok;
    }
  }
  return m;
}

// The dense reference in double, and the calibrated bound of the f32 reference's deviation from
// it. Bound, per output (row, head, d), over the visible keys J with softmax weights p_j:
//   logit error  e_j = (D + 4) u scale sum_d |q_d k_jd| + 4 u |s_j|     (f32 dot, k^ and scale roundings)
//   output error 2 sum_j p_j e_j |v_jd - o_d| + (4 |J| + 16) u (sum_j p_j |v_jd| + |o_d|)
//                (the logit errors through the softmax; exp, the online rescaling and the
//                 division, each a few u per key)
// plus half an ulp of the output dtype at |o| (the one final rounding). u = 2^-24.
struct Expected {
  std::vector<double> out;  // [T, H, D]
  std::vector<double> tol;
  std::vector<double> f32_bound;  // the part of tol before the final rounding
};

inline Expected dense_reference(const Bench& b) {
  const auto& p = b.p;
  const int64_t H = p.num_heads, Hkv = p.num_kv_heads, D = p.head_size, G = H / Hkv;
  const double u = std::ldexp(1.0, -24);
  const double scale = p.options.scale ? double(*p.options.scale) : std::pow(double(D), -0.5);
  const double c = p.options.softcap;
  Expected e;
  e.out.assign(size_t(b.num_tokens() * H * D), 0.0);
  e.tol.assign(e.out.size(), 0.0);
  e.f32_bound.assign(e.out.size(), 0.0);
  int64_t row0 = 0;
  for (size_t r = 0; r < p.seqs.size(); ++r) {
    const int64_t q_len = p.seqs[r].q_len, L = p.seqs[r].ctx + q_len;
    const auto mask = mask_matrix(q_len, L, p.options);
    for (int64_t i = 0; i < q_len; ++i) {
      const int64_t t = row0 + i;
      for (int64_t h = 0; h < H; ++h) {
        const int64_t kvh = h / G;
        const float* qv = &b.q_values[size_t((t * H + h) * D)];
        std::vector<double> s(static_cast<size_t>(L)), e_s(static_cast<size_t>(L));
        double mx = -INFINITY;
        for (int64_t j = 0; j < L; ++j) {
          if (!mask[size_t(i)][size_t(j)]) continue;
          double dot = 0, dot_abs = 0;
          for (int64_t d = 0; d < D; ++d) {
            const double kd = b.key_dense[r][size_t((j * Hkv + kvh) * D + d)];
            dot += double(qv[d]) * kd;
            dot_abs += std::fabs(double(qv[d]) * kd);
          }
          double sj = scale * dot;
          if (c > 0) sj = c * std::tanh(sj / c);
          s[size_t(j)] = sj;
          e_s[size_t(j)] = double(D + 4) * u * scale * dot_abs + 4 * u * std::fabs(sj);
          mx = std::max(mx, sj);
        }
        std::vector<double> w(size_t(L), 0.0);
        double sum = 0;
        int64_t visible = 0;
        for (int64_t j = 0; j < L; ++j) {
          if (!mask[size_t(i)][size_t(j)]) continue;
          w[size_t(j)] = std::exp(s[size_t(j)] - mx);
          sum += w[size_t(j)];
          ++visible;
        }
        for (int64_t d = 0; d < D; ++d) {
          double o = 0;
          for (int64_t j = 0; j < L; ++j) {
            if (w[size_t(j)] != 0) o += w[size_t(j)] / sum * b.value_dense[r][size_t((j * Hkv + kvh) * D + d)];
          }
          double through_logits = 0, weighted_abs = 0;
          for (int64_t j = 0; j < L; ++j) {
            if (w[size_t(j)] == 0) continue;
            const double pj = w[size_t(j)] / sum, vj = b.value_dense[r][size_t((j * Hkv + kvh) * D + d)];
            through_logits += pj * e_s[size_t(j)] * std::fabs(vj - o);
            weighted_abs += pj * std::fabs(vj);
          }
          const double f32_bound = 2 * through_logits + double(4 * visible + 16) * u * (weighted_abs + std::fabs(o));
          const size_t at = size_t((t * H + h) * D + d);
          e.out[at] = o;
          e.f32_bound[at] = f32_bound;
          e.tol[at] = f32_bound + ops_test::ulp_of(std::fabs(o) + f32_bound, p.dtype) / 2;
        }
      }
    }
    row0 += q_len;
  }
  return e;
}

// Runs the op on a bench, checks the cache bytes it wrote and every output against the dense
// reference. Returns, for calibration reports, the largest |error| / tolerance, and for f32
// outputs (whose final rounding is negligible) the largest |error| / f32 bound.
struct Calibration {
  double worst = 0, worst_f32 = 0;
  void merge(const Calibration& c) {
    worst = std::max(worst, c.worst);
    worst_f32 = std::max(worst_f32, c.worst_f32);
  }
};

inline Calibration run_and_check(Bench& b, const ForwardContext& ctx) {
  SCOPED_TRACE(b.p.describe());
  const Tensor out = ops::paged_attention(ctx, b.q, b.k, b.v, b.cache, b.md, b.p.options);
  EXPECT_EQ(out.shape(), (Shape{b.num_tokens(), b.p.num_heads, b.p.head_size}));
  EXPECT_EQ(out.dtype(), b.p.dtype);
  EXPECT_EQ(std::memcmp(b.cache.key_cache.data_ptr(), b.expected_key_cache.data_ptr(), b.cache.key_cache.nbytes()), 0)
      << "key cache bytes";
  EXPECT_EQ(
      std::memcmp(b.cache.value_cache.data_ptr(), b.expected_value_cache.data_ptr(), b.cache.value_cache.nbytes()), 0)
      << "value cache bytes";
  const Expected e = dense_reference(b);
  const std::vector<float> got = ops_test::to_floats(out);
  Calibration cal;
  int64_t failures = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(double(got[i]) - e.out[i]);
    // A NaN or inf the reference expects must come out as such; otherwise the bound (which a NaN
    // fails).
    const bool ok = std::isfinite(e.out[i]) ? err <= e.tol[i]
                                            : (std::isnan(e.out[i]) ? std::isnan(got[i]) : double(got[i]) == e.out[i]);
    if (!ok && failures++ < 5) {
      ADD_FAILURE() << "out[" << i << "] (token " << int64_t(i) / (b.p.num_heads * b.p.head_size) << ") = " << got[i]
                    << ", expected " << e.out[i] << " +- " << e.tol[i];
    }
    if (!std::isfinite(e.out[i])) continue;
    if (e.tol[i] > 0) cal.worst = std::max(cal.worst, err / e.tol[i]);
    if (b.p.dtype == DType::kF32 && e.f32_bound[i] > 0) cal.worst_f32 = std::max(cal.worst_f32, err / e.f32_bound[i]);
  }
  EXPECT_EQ(failures, 0);
  return cal;
}

}  // namespace fp8kit::attention_test
