// The fast CPU paged attention (attention_cpu.h): per (query row, head) the keys' logits into a
// scratch row, then the softmax and the weighted sum of the values, in AVX2 f32 lanes (under the
// target pragma below). A prefill's query heads that share a KV head go together, each key and
// value row widened once for all of them (the same bits). Called only where best_cpu_isa() has
// AVX2/FMA/F16C. Tested by tests/cpu/test_paged_attention*.cpp and PagedAttentionCpu.*.
#include "ops/attention/attention_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/cpu_features.h"
#include "core/parallel.h"
#include "fp8kit/half.h"
#include "ops/attention/attention_ref.h"
#include "ops/kv_cache/kv_cache_ref.h"

#if defined(__x86_64__)
#include <immintrin.h>
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#define FP8KIT_ATTENTION_POP_TARGET 1
#elif defined(__GNUC__)
#pragma GCC target("avx2,fma,f16c")
#endif
#endif

namespace fp8kit::ops {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr int kLanes = 16;

float running_max(float m, float s) { return (s > m || std::isnan(s)) ? s : m; }  // as the reference
float capped(float s, float softcap) { return softcap > 0.0f ? softcap * std::tanh(s / softcap) : s; }

// Row `at` of a cache (or of q) as f32: 16-bit elements widened exactly, FP8 bytes decoded and
// multiplied by `scale` (the reference's f32(decode) * scale).
template <typename T>
void widen(const void* base, int64_t at, int64_t n, KvCacheDtype cache_dtype, const float* fp8_table, float scale,
           float* dst) {
  if (cache_dtype != KvCacheDtype::kAuto) {
    const uint8_t* src = static_cast<const uint8_t*>(base) + at;
    for (int64_t d = 0; d < n; ++d) dst[d] = fp8_table[src[d]] * scale;
    return;
  }
  const T* src = static_cast<const T*>(base) + at;
  if constexpr (std::is_same_v<T, float>) {
    std::memcpy(dst, src, size_t(n) * sizeof(float));
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    for (int64_t d = 0; d < n; ++d) {
      const uint32_t bits = uint32_t(src[d].bits) << 16;
      std::memcpy(&dst[d], &bits, 4);
    }
  } else {
    int64_t d = 0;
#if defined(__x86_64__)
    for (; d + 8 <= n; d += 8) {
      _mm256_storeu_ps(dst + d, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + d))));
    }
#endif
    for (; d < n; ++d) dst[d] = to_float(src[d]);
  }
}

// sum_d a[d] b[d] in f32: lane l adds the products of d = 16 i + l in d order, the lanes combined
// by a fixed tree (a mul then an add: no contraction, the file is built with -ffp-contract=off).
// The 16 lanes are two ymm registers and the tree is (l, l + 8), (l, l + 4), (l, l + 2), (l, l + 1)
// in registers (a loop over a lane array went through memory, and took most of the dot's time).
float dot(const float* a, const float* b, int64_t n) {
  int64_t d = 0;
#if defined(__x86_64__)
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  for (; d + kLanes <= n; d += kLanes) {
    lo = _mm256_add_ps(lo, _mm256_mul_ps(_mm256_loadu_ps(a + d), _mm256_loadu_ps(b + d)));
    hi = _mm256_add_ps(hi, _mm256_mul_ps(_mm256_loadu_ps(a + d + 8), _mm256_loadu_ps(b + d + 8)));
  }
  if (d < n) {  // a short last step: only its lanes add (a zero product would turn -0 into +0)
    alignas(32) float lane[kLanes];
    _mm256_store_ps(lane, lo);
    _mm256_store_ps(lane + 8, hi);
    for (int l = 0; d + l < n; ++l) lane[l] += a[d + l] * b[d + l];
    lo = _mm256_load_ps(lane);
    hi = _mm256_load_ps(lane + 8);
  }
  const __m256 s8 = _mm256_add_ps(lo, hi);
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
#else
  float lane[kLanes] = {};
  for (; d + kLanes <= n; d += kLanes) {
    for (int l = 0; l < kLanes; ++l) lane[l] += a[d + l] * b[d + l];
  }
  for (int l = 0; d + l < n; ++l) lane[l] += a[d + l] * b[d + l];
  for (int width = kLanes / 2; width >= 1; width /= 2) {
    for (int l = 0; l < width; ++l) lane[l] += lane[l + width];
  }
  return lane[0];
#endif
}

// Key and value rows come from the paged cache, which a decode step reads once per layer and
// which is past the caches by the next step: the loads of a row stalled (perf put most of a
// decode's attention on the instructions after them). So each row kPrefetchRows ahead is
// prefetched (keys of the sequence only: their block table entries are valid).
constexpr int64_t kPrefetchRows = 8;

inline void prefetch_row(const void* base, int64_t at, int64_t bytes) {
  const char* p = static_cast<const char*>(base) + at;
  for (int64_t b = 0; b < bytes; b += 64) {
#if defined(__x86_64__)
    asm volatile("prefetcht0 %0" : : "m"(p[b]));  // GCC 12 at -O1 and above dropped __builtin_prefetch here
#else
    __builtin_prefetch(p + b, 0, 3);
#endif
  }
}

// Per-thread rows of the query-head groups (heads sharing one KV head): q, acc and the logits of
// each head. Grows to the largest group and context asked and stays, so steps allocate nothing.
struct GroupScratch {
  float* qf;      // [group][d]
  float* acc;     // [group][d]
  float* logits;  // [group][keys]
  static GroupScratch get(int64_t group, int64_t d, int64_t keys) {
    thread_local std::vector<float> buffer;
    const size_t need = size_t(group * (2 * d + keys));
    if (buffer.size() < need) buffer.resize(need);
    return {buffer.data(), buffer.data() + group * d, buffer.data() + 2 * group * d};
  }
};

// Query rows t of sequence r: its index and the position of t.
struct QueryRow {
  int64_t r, pos;
};
inline QueryRow query_row(const PagedAttentionArgs& a, int64_t t) {
  const int32_t* qsl = a.query_start_loc;
  const int64_t r = std::upper_bound(qsl, qsl + a.num_seqs + 1, int32_t(t)) - qsl - 1;
  return {r, a.seq_lens[r] - (qsl[r + 1] - qsl[r]) + (t - qsl[r])};
}

// Heads [h0, h0 + group) of query row t (all on KV head kvh): each key and value row is widened
// once for the whole group, and each head does the arithmetic of its own in the same order as
// one head alone, so the grouping changes no bit.
template <typename T>
void attend_group(const PagedAttentionArgs& a, const float* fp8_table, int64_t t, int64_t h0, int64_t group,
                  int64_t kvh, float* kv, const GroupScratch& g) {
  const auto* q = static_cast<const T*>(a.q);
  auto* out = static_cast<T*>(a.out);
  const int64_t d_n = a.head_size;
  const bool fp8 = a.cache_dtype != KvCacheDtype::kAuto;
  const QueryRow row = query_row(a, t);
  const int64_t seq_len = a.seq_lens[row.r];
  const int32_t* table = a.block_table + row.r * a.block_table_stride;
  const float ks = fp8 ? a.k_scale[kvh * a.kv_scale_stride] : 1.0f;
  const float vs = fp8 ? a.v_scale[kvh * a.kv_scale_stride] : 1.0f;
  const VisibleKeys vk = visible_keys(a, row.pos, seq_len);
  const int64_t keys = std::max<int64_t>(vk.last - vk.first + 1, 0);
  constexpr int kMaxGroup = 16;
  float m[kMaxGroup], l[kMaxGroup];
  int64_t live[kMaxGroup];
  for (int64_t e = 0; e < group; ++e) {
    widen<T>(q, t * a.q_token_stride + (h0 + e) * a.q_head_stride, d_n, KvCacheDtype::kAuto, nullptr, 1.0f,
             g.qf + e * d_n);
    std::fill(g.acc + e * d_n, g.acc + (e + 1) * d_n, 0.0f);
    m[e] = kNegInf;
    l[e] = 0.0f;
    live[e] = vk.last + 1;  // the first key whose logit is not -inf
  }
  const int64_t elem = fp8 ? 1 : int64_t(sizeof(T)), row_bytes = d_n * elem;
  auto prefetch = [&](const void* cache, const PagedCacheLayout& layout, int64_t j) {
    if (j <= vk.last) prefetch_row(cache, layout.offset(table[j / layout.block_size], j % layout.block_size, kvh) * elem, row_bytes);
  };
  for (int64_t j = vk.first; j <= vk.last; ++j) {
    prefetch(a.key_cache, a.key_layout, j + kPrefetchRows);
    const int64_t ko = a.key_layout.offset(table[j / a.key_layout.block_size], j % a.key_layout.block_size, kvh);
    widen<T>(a.key_cache, ko, d_n, a.cache_dtype, fp8_table, ks, kv);
    for (int64_t e = 0; e < group; ++e) {
      const float s = capped(dot(g.qf + e * d_n, kv, d_n) * a.scale, a.softcap);
      g.logits[e * keys + (j - vk.first)] = s;
      m[e] = running_max(m[e], s);
      if (live[e] > vk.last && m[e] != kNegInf) live[e] = j;
    }
  }
  // From each head's first live key on, as the reference's online softmax (which skips the -inf
  // logits before it, but multiplies later values by their zero weight: 0 * inf is NaN).
  int64_t first_live = vk.last + 1;
  for (int64_t e = 0; e < group; ++e) {
    if (m[e] != kNegInf) first_live = std::min(first_live, live[e]);
  }
  for (int64_t j = first_live; j <= vk.last; ++j) {
    prefetch(a.value_cache, a.value_layout, j + kPrefetchRows);
    const int64_t vo = a.value_layout.offset(table[j / a.value_layout.block_size], j % a.value_layout.block_size, kvh);
    widen<T>(a.value_cache, vo, d_n, a.cache_dtype, fp8_table, vs, kv);
    for (int64_t e = 0; e < group; ++e) {
      if (m[e] == kNegInf || j < live[e]) continue;
      const float p = std::exp(g.logits[e * keys + (j - vk.first)] - m[e]);
      l[e] += p;
      float* acc = g.acc + e * d_n;
      for (int64_t d = 0; d < d_n; ++d) acc[d] += p * kv[d];
    }
  }
  for (int64_t e = 0; e < group; ++e) {
    const float* acc = g.acc + e * d_n;
    T* out_row = out + (t * a.num_heads + h0 + e) * d_n;
    for (int64_t d = 0; d < d_n; ++d) out_row[d] = from_float<T>(l[e] == 0.0f ? 0.0f : acc[d] / l[e]);
  }
}

constexpr int64_t kSerialWork = int64_t(1) << 18;

template <typename T>
void run(const PagedAttentionArgs& a, int num_threads) {
  auto* out = static_cast<T*>(a.out);
  const int64_t real_tokens = a.query_start_loc[a.num_seqs];
  const int64_t d_n = a.head_size, row = a.num_heads * d_n;
  for (int64_t i = real_tokens * row; i < a.num_tokens * row; ++i) out[i] = from_float<T>(0.0f);  // padding rows
  const bool fp8 = a.cache_dtype != KvCacheDtype::kAuto;
  float fp8_table[256];
  if (fp8) {
    for (int b = 0; b < 256; ++b) fp8_table[b] = kv_cache_decode(uint8_t(b), a.cache_dtype);
  }
  // Multiply-adds of the logits and the weighted sums, every key of a sequence counted for each of
  // its query rows: below kSerialWork one thread (a decode step's attention over a short context
  // takes microseconds, about what a hand-off to a worker that is not spinning costs).
  int64_t work = 0;
  for (int64_t s = 0; s < a.num_seqs; ++s) work += int64_t(a.query_start_loc[s + 1] - a.query_start_loc[s]) * a.seq_lens[s];
  work *= a.num_heads * 2 * d_n;
  const bool serial = work < kSerialWork || num_threads == 1;
  const int64_t group_size = a.num_heads / a.num_kv_heads;
  // A prefill's many rows, or any call on one thread: one item per (row, KV head), whose query
  // heads share each widened key and value row. A decode's few rows on threads: one item per
  // head, so that the threads get even shares.
  const int64_t group = (real_tokens > 1 || serial) && group_size <= 16 ? group_size : 1;
  const int64_t items = real_tokens * (a.num_heads / group);
  const int64_t per_part = scratch_floats_per_part(a);
  parallel_for_at_most(serial ? 1 : num_threads, a.num_parts, 1, [&](int64_t p0, int64_t p1) {
    const GroupScratch g = GroupScratch::get(group, d_n, a.max_seq_len);
    for (int64_t part = p0; part < p1; ++part) {
      float* kv = a.scratch + part * per_part + 2 * d_n;
      for (int64_t item = part; item < items; item += a.num_parts) {
        const int64_t t = item / (a.num_heads / group), h0 = (item % (a.num_heads / group)) * group;
        attend_group<T>(a, fp8_table, t, h0, group, h0 / group_size, kv, g);
      }
    }
  });
}

}  // namespace

void paged_attention_cpu(const PagedAttentionArgs& args, const Overrides& overrides, int num_threads) {
  if (overrides.cpu_backend == CpuBackend::kReference || args.read_mode != AttentionReadMode::kDequantize ||
      best_cpu_isa() == CpuIsa::kPortable) {
    return paged_attention_ref(args);
  }
  switch (args.dtype) {
    case DType::kBF16: return run<BFloat16>(args, num_threads);
    case DType::kF16: return run<Float16>(args, num_threads);
    default: return run<float>(args, num_threads);
  }
}

}  // namespace fp8kit::ops

#if defined(FP8KIT_ATTENTION_POP_TARGET)
#pragma clang attribute pop
#endif
