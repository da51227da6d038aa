// CPU reference of paged_attention (attention_ref.h). Work items are (query row, head) pairs,
// dealt round-robin to num_parts parts that run on the thread pool, each with its own scratch
// row. Both read modes walk the visible keys in ascending order through the block table.
#include "ops/attention/attention_ref.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/parallel.h"
#include "fp8kit/fp8.h"
#include "fp8kit/half.h"
#include "ops/kv_cache/kv_cache_ref.h"

namespace fp8kit::ops {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kLog2e = 1.44269504088896340736f;
constexpr float kFp8Max = 448.0f;
constexpr float kFa3MaxOffset = 8.0f;  // FlashAttention-3's Max_offset for FP8: P~ <= 2^8

// The running maximum of the online softmax; a NaN logit takes over (and stays), so it reaches
// the output instead of being skipped by the comparison.
float running_max(float m, float s) { return (s > m || std::isnan(s)) ? s : m; }

float capped(float s, float softcap) { return softcap > 0.0f ? softcap * std::tanh(s / softcap) : s; }

// One sequence's view of the paged caches for one KV head: element d of key or value j.
template <typename T>
struct SeqCache {
  const PagedAttentionArgs& a;
  const int32_t* table;  // the sequence's block table row
  int64_t kv_head;

  int64_t key_offset(int64_t j) const {
    return a.key_layout.offset(table[j / a.key_layout.block_size], j % a.key_layout.block_size, kv_head);
  }
  int64_t value_offset(int64_t j) const {
    return a.value_layout.offset(table[j / a.value_layout.block_size], j % a.value_layout.block_size, kv_head);
  }
  // The cached value: the element widened (auto) or the FP8 value before any scale (exact).
  float raw(const void* cache, int64_t at) const {
    if (a.cache_dtype == KvCacheDtype::kAuto) return to_float(static_cast<const T*>(cache)[at]);
    return kv_cache_decode(static_cast<const uint8_t*>(cache)[at], a.cache_dtype);
  }
};

// kDequantize: k^ = f32(decode) * k_scale (one f32 rounding), f32 dots in d order, the online
// softmax of the header in key order, out = T(acc / l).
template <typename T>
void attend_dequantize(const PagedAttentionArgs& a, const SeqCache<T>& c, const T* q, int64_t pos, int64_t seq_len,
                       float* qf, float* acc, T* out) {
  const int64_t d_n = a.head_size;
  const bool fp8 = a.cache_dtype != KvCacheDtype::kAuto;
  const float ks = fp8 ? a.k_scale[c.kv_head * a.kv_scale_stride] : 1.0f;
  const float vs = fp8 ? a.v_scale[c.kv_head * a.kv_scale_stride] : 1.0f;
  for (int64_t d = 0; d < d_n; ++d) qf[d] = to_float(q[d]), acc[d] = 0.0f;
  float m = kNegInf, l = 0.0f;
  const VisibleKeys vk = visible_keys(a, pos, seq_len);
  for (int64_t j = vk.first; j <= vk.last; ++j) {
    const int64_t ko = c.key_offset(j), vo = c.value_offset(j);
    float dot = 0.0f;
    for (int64_t d = 0; d < d_n; ++d) {
      const float k = fp8 ? c.raw(a.key_cache, ko + d) * ks : c.raw(a.key_cache, ko + d);
      dot += qf[d] * k;
    }
    const float s = capped(dot * a.scale, a.softcap);
    const float m_new = running_max(m, s);
    if (m_new == kNegInf) continue;  // every logit so far is -inf: nothing has weight yet
    const float correction = std::exp(m - m_new);
    const float p = std::exp(s - m_new);
    l = l * correction + p;
    for (int64_t d = 0; d < d_n; ++d) {
      const float v = fp8 ? c.raw(a.value_cache, vo + d) * vs : c.raw(a.value_cache, vo + d);
      acc[d] = acc[d] * correction + p * v;
    }
    m = m_new;
  }
  for (int64_t d = 0; d < d_n; ++d) out[d] = from_float<T>(l == 0.0f ? 0.0f : acc[d] / l);
}

// kFp8Compute: FlashAttention-3's FP8 path over the whole row as one tile (docs/numerics.md).
template <typename T>
void attend_fp8(const PagedAttentionArgs& a, const SeqCache<T>& c, const T* q, int64_t pos, int64_t seq_len, float* qf,
                float* acc, float* logits, T* out) {
  const int64_t d_n = a.head_size;
  const int64_t group = c.kv_head;  // query heads of KV group g share q_scale[g]
  const float q_descale = a.q_scale[group * a.q_scale_stride];
  const float k_descale = a.k_scale[c.kv_head * a.kv_scale_stride];
  const float v_descale = a.v_scale[c.kv_head * a.kv_scale_stride];
  const float q_inv = 1.0f / q_descale;
  for (int64_t d = 0; d < d_n; ++d) {
    const float y = std::fmax(-kFp8Max, std::fmin(to_float(q[d]) * q_inv, kFp8Max));  // NaN -> +448
    qf[d] = e4m3fn_bits_to_float(float_to_e4m3fn_bits(y));
    acc[d] = 0.0f;
  }
  const float alpha = (a.scale * q_descale) * k_descale;  // softmax_scale * q_descale * k_descale
  const VisibleKeys vk = visible_keys(a, pos, seq_len);
  float max_x = kNegInf;
  for (int64_t j = vk.first; j <= vk.last; ++j) {
    const int64_t ko = c.key_offset(j);
    float raw = 0.0f;
    for (int64_t d = 0; d < d_n; ++d) raw += qf[d] * c.raw(a.key_cache, ko + d);
    const float x = capped(raw * alpha, a.softcap) * kLog2e;
    logits[j - vk.first] = x;
    max_x = running_max(max_x, x);
  }
  if (max_x == kNegInf) {  // no visible key, or every logit -inf
    for (int64_t d = 0; d < d_n; ++d) out[d] = from_float<T>(0.0f);
    return;
  }
  const float shifted_max = max_x - kFa3MaxOffset;
  float row_sum = 0.0f;
  for (int64_t j = vk.first; j <= vk.last; ++j) {
    const float p = std::exp2(logits[j - vk.first] - shifted_max);   // in [0, 256]
    row_sum += p;                                                    // from the unrounded P~
    const float p8 = e4m3fn_bits_to_float(float_to_e4m3fn_bits(p));  // P~ as e4m3 for the P.V product
    const int64_t vo = c.value_offset(j);
    for (int64_t d = 0; d < d_n; ++d) acc[d] += p8 * c.raw(a.value_cache, vo + d);
  }
  const float factor = (1.0f / row_sum) * v_descale;
  for (int64_t d = 0; d < d_n; ++d) out[d] = from_float<T>(acc[d] * factor);
}

template <typename T>
void run(const PagedAttentionArgs& a) {
  const auto* q = static_cast<const T*>(a.q);
  auto* out = static_cast<T*>(a.out);
  const int64_t real_tokens = a.query_start_loc[a.num_seqs];
  const int64_t row = a.num_heads * a.head_size;
  for (int64_t i = real_tokens * row; i < a.num_tokens * row; ++i) out[i] = from_float<T>(0.0f);  // padding rows
  const int64_t items = real_tokens * a.num_heads;
  const int64_t group_size = a.num_heads / a.num_kv_heads;
  const int64_t per_part = scratch_floats_per_part(a);
  parallel_for(a.num_parts, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t part = p0; part < p1; ++part) {
      float* qf = a.scratch + part * per_part;
      float* acc = qf + a.head_size;
      float* logits = acc + a.head_size;
      for (int64_t item = part; item < items; item += a.num_parts) {
        const int64_t t = item / a.num_heads, h = item % a.num_heads;
        // The sequence of row t: the last r with query_start_loc[r] <= t.
        const int32_t* qsl = a.query_start_loc;
        const int64_t r = std::upper_bound(qsl, qsl + a.num_seqs + 1, int32_t(t)) - qsl - 1;
        const int64_t seq_len = a.seq_lens[r];
        const int64_t pos = seq_len - (qsl[r + 1] - qsl[r]) + (t - qsl[r]);  // ctx + i
        const SeqCache<T> cache{a, a.block_table + r * a.block_table_stride, h / group_size};
        const T* q_row = q + t * a.q_token_stride + h * a.q_head_stride;
        T* out_row = out + (t * a.num_heads + h) * a.head_size;
        if (a.read_mode == AttentionReadMode::kFp8Compute) {
          attend_fp8(a, cache, q_row, pos, seq_len, qf, acc, logits, out_row);
        } else {
          attend_dequantize(a, cache, q_row, pos, seq_len, qf, acc, out_row);
        }
      }
    }
  });
}

}  // namespace

void paged_attention_ref(const PagedAttentionArgs& args) {
  switch (args.dtype) {
    case DType::kBF16: return run<BFloat16>(args);
    case DType::kF16: return run<Float16>(args);
    default: return run<float>(args);
  }
}

}  // namespace fp8kit::ops
