// The fast CPU paged attention (attention_cpu.h), in AVX2 f32 lanes (under the target pragma
// below): tiles of up to 16 query rows x heads that share a KV head, each key and value row widened
// once per tile and serving all of its rows, flash-attention style over chunks of 16 keys with the
// softmax lane-wise (a lane is a row). Called only where best_cpu_isa() has AVX2/FMA/F16C. Tested
// by tests/cpu/test_paged_attention*.cpp and PagedAttentionCpu.*.
#include "ops/attention/attention_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/cpu_features.h"
#include "core/parallel.h"
#include "core/prefetch.h"
#include "fp8kit/half.h"
#include "ops/attention/attention_ref.h"
#include "ops/kv_cache/kv_cache_ref.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define FP8KIT_ATTENTION_AVX2 1
#include "ops/avx2_target_begin.h"

namespace fp8kit::ops {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

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
    int64_t d = 0;
    for (; d + 8 <= n; d += 8) {
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + d));
      _mm256_storeu_ps(dst + d, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
    }
    for (; d < n; ++d) {
      const uint32_t bits = uint32_t(src[d].bits) << 16;
      std::memcpy(&dst[d], &bits, 4);
    }
  } else {
    int64_t d = 0;
    for (; d + 8 <= n; d += 8) {
      _mm256_storeu_ps(dst + d, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + d))));
    }
    for (; d < n; ++d) dst[d] = to_float(src[d]);
  }
}

// Key and value rows come from the paged cache, which a decode step reads once per layer and
// which is past the caches by the next step: the loads of a row stalled (perf put most of a
// decode's attention on the instructions after them). So the rows of the next chunk of keys are
// prefetched while the current one is computed.
inline void prefetch_row(const void* base, int64_t at, int64_t bytes) {
  const char* p = static_cast<const char*>(base) + at;
  for (int64_t b = 0; b < bytes; b += 64) prefetch_l1(p + b);
}

// e^x for x <= 0, -inf and NaN (the softmax's arguments, which are never positive): Cephes' expf
// (n = round(x log2 e), r = x - n ln 2 in two parts, a degree-7 polynomial in r, times 2^n), about
// 1 ulp from expf; below -87.33 (where the result leaves the normal range) 0, NaN stays NaN.
inline __m256 exp_nonpositive(__m256 x) {
  const __m256 lowest = _mm256_set1_ps(-87.33654f);
  const __m256 underflow = _mm256_cmp_ps(x, lowest, _CMP_LT_OQ);
  const __m256 xc = _mm256_max_ps(lowest, x);  // NaN: max_ps returns its second operand
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 poly = _mm256_set1_ps(1.9875691500e-4f);
  poly = _mm256_fmadd_ps(poly, r, _mm256_set1_ps(1.3981999507e-3f));
  poly = _mm256_fmadd_ps(poly, r, _mm256_set1_ps(8.3334519073e-3f));
  poly = _mm256_fmadd_ps(poly, r, _mm256_set1_ps(4.1665795894e-2f));
  poly = _mm256_fmadd_ps(poly, r, _mm256_set1_ps(1.6666665459e-1f));
  poly = _mm256_fmadd_ps(poly, r, _mm256_set1_ps(5.0000001201e-1f));
  poly = _mm256_fmadd_ps(poly, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i two_n = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(underflow, _mm256_mul_ps(poly, _mm256_castsi256_ps(two_n)));
}

// Keys a step of the tile loop.
constexpr int kChunk = 16;
// Rows of a tile: its lanes (query rows x heads of one KV head), in one or two vectors of 8.
constexpr int kMaxLanes = 16;

// A tile: tokens [t0, t1) of one sequence x heads [h0, h1) of KV head kvh, lane = (t - t0) *
// (h1 - h0) + (h - h0).
struct Tile {
  int64_t seq, kvh, t0, t1, h0, h1;
};

// How the rows of a call are cut into tiles: per sequence and KV head, `tokens` query rows x
// `heads` query heads a tile (a group of more than kMaxLanes heads in several), so that a tile
// fills up to kMaxLanes lanes and each key row it reads serves all of them.
struct Tiling {
  int64_t heads = 1, head_chunks = 1, tokens = 1;
  std::vector<int64_t>* first_tile = nullptr;  // [num_seqs + 1]: the tiles of sequence s start at [s]

  int64_t count() const { return first_tile->back(); }
  Tile tile(const PagedAttentionArgs& a, int64_t i) const {
    const auto& f = *first_tile;
    const int64_t s = std::upper_bound(f.begin(), f.end(), i) - f.begin() - 1;
    int64_t rest = i - f[size_t(s)];
    const int64_t hc = rest % head_chunks;
    rest /= head_chunks;
    const int64_t kvh = rest % a.num_kv_heads, tc = rest / a.num_kv_heads;
    const int64_t group = a.num_heads / a.num_kv_heads;
    const int64_t t0 = a.query_start_loc[s] + tc * tokens;
    const int64_t h0 = kvh * group + hc * heads;
    return {s, kvh, t0, std::min<int64_t>(t0 + tokens, a.query_start_loc[s + 1]), h0,
            std::min<int64_t>(h0 + heads, (kvh + 1) * group)};
  }
};

Tiling make_tiling(const PagedAttentionArgs& a) {
  thread_local std::vector<int64_t> first_tile;  // grows to the largest batch and stays
  Tiling t;
  const int64_t group = a.num_heads / a.num_kv_heads;
  t.heads = std::min<int64_t>(group, kMaxLanes);
  t.head_chunks = (group + t.heads - 1) / t.heads;
  t.tokens = std::max<int64_t>(kMaxLanes / t.heads, 1);
  first_tile.resize(size_t(a.num_seqs + 1));
  first_tile[0] = 0;
  for (int64_t s = 0; s < a.num_seqs; ++s) {
    const int64_t rows = a.query_start_loc[s + 1] - a.query_start_loc[s];
    first_tile[size_t(s + 1)] = first_tile[size_t(s)] + (rows + t.tokens - 1) / t.tokens * a.num_kv_heads * t.head_chunks;
  }
  t.first_tile = &first_tile;
  return t;
}

// Per-thread buffers of a tile, as floats: q and the accumulator transposed ([d][lane]), the
// chunk's key and value rows ([key][d], d padded to a multiple of 4 with zeros), its logits and
// then weights ([key][lane]) and which lanes see each key. Grows to the largest head size and
// stays, so steps allocate nothing.
struct TileScratch {
  float *qt, *ot, *keys, *values, *p, *seen;
  int64_t dp;
  static TileScratch get(int64_t head_size) {
    thread_local std::vector<float> buffer;
    const int64_t dp = (head_size + 3) / 4 * 4;
    const size_t need = size_t(2 * dp * kMaxLanes + 2 * kChunk * dp + 2 * kChunk * kMaxLanes);
    if (buffer.size() < need) buffer.resize(need);
    float* b = buffer.data();
    return {b, b + dp * kMaxLanes, b + 2 * dp * kMaxLanes, b + 2 * dp * kMaxLanes + kChunk * dp,
            b + 2 * dp * kMaxLanes + 2 * kChunk * dp, b + 2 * dp * kMaxLanes + 2 * kChunk * dp + kChunk * kMaxLanes, dp};
  }
};

// One tile (kVecs vectors of 8 lanes), flash-attention style over chunks of kChunk keys: the
// chunk's logits S[key][lane] = scale * q . k (f32 FMAs over d), masked to -inf where the lane
// does not see the key, its maximum merged into the lane's running maximum m, the weights p =
// e^(S - m) (0 for a logit of -inf), l = l * e^(m_old - m) + sum p, and acc = acc * e^(m_old - m)
// + sum p v over the keys the lane sees. Lanes are query rows, so the softmax is lane-wise: no
// horizontal sums. NaN is sticky in m (a NaN logit makes the lane's output NaN, as the
// reference), and a chunk where some lane does not see some key adds p v under a mask, so that
// keys a row does not see never reach its output (their values may be anything).
template <typename T, int kVecs>
void attend_tile(const PagedAttentionArgs& a, const float* fp8_table, const Tile& tile, const TileScratch& sc) {
  constexpr int kLanes = 8 * kVecs;
  const int64_t d_n = a.head_size, dp = sc.dp;
  const int64_t heads = tile.h1 - tile.h0, lanes = (tile.t1 - tile.t0) * heads;
  const bool fp8 = a.cache_dtype != KvCacheDtype::kAuto;
  const int64_t seq_len = a.seq_lens[tile.seq];
  const int32_t* table = a.block_table + tile.seq * a.block_table_stride;
  const float ks = fp8 ? a.k_scale[tile.kvh * a.kv_scale_stride] : 1.0f;
  const float vs = fp8 ? a.v_scale[tile.kvh * a.kv_scale_stride] : 1.0f;
  // Query row t sits at position pos0 + t: the sequence's rows are its last tokens.
  const int64_t rows = a.query_start_loc[tile.seq + 1] - a.query_start_loc[tile.seq];
  const int64_t pos0 = seq_len - rows - a.query_start_loc[tile.seq];

  // The lanes' rows and the keys each sees (padding lanes none).
  alignas(32) int32_t first[kLanes], last[kLanes];
  int64_t key_first = INT64_MAX, key_last = -1, all_first = -1, all_last = INT64_MAX;
  for (int r = 0; r < kLanes; ++r) {
    first[r] = INT32_MAX, last[r] = -1;
    if (r >= lanes) continue;
    const VisibleKeys vk = visible_keys(a, pos0 + tile.t0 + r / heads, seq_len);
    if (vk.first > vk.last) {
      all_first = INT64_MAX;  // a lane that sees nothing: no chunk is whole
      continue;
    }
    first[r] = int32_t(vk.first), last[r] = int32_t(vk.last);
    key_first = std::min(key_first, vk.first), key_last = std::max(key_last, vk.last);
    all_first = std::max(all_first, vk.first), all_last = std::min(all_last, vk.last);
  }
  // q transposed, zeros in padding lanes; the accumulator zero.
  std::fill(sc.qt, sc.qt + dp * kLanes, 0.0f);
  std::fill(sc.ot, sc.ot + dp * kLanes, 0.0f);
  alignas(32) float row[512];
  float* qrow = d_n <= 512 ? row : sc.keys;  // sc.keys is free until the first chunk
  for (int64_t r = 0; r < lanes; ++r) {
    const int64_t t = tile.t0 + r / heads, h = tile.h0 + r % heads;
    widen<T>(a.q, t * a.q_token_stride + h * a.q_head_stride, d_n, KvCacheDtype::kAuto, nullptr, 1.0f, qrow);
    for (int64_t d = 0; d < d_n; ++d) sc.qt[d * kLanes + r] = qrow[d];
  }
  __m256 m[kVecs], l[kVecs];
  __m256i lane_first[kVecs], lane_last[kVecs];
  for (int v = 0; v < kVecs; ++v) {
    m[v] = _mm256_set1_ps(kNegInf), l[v] = _mm256_setzero_ps();
    lane_first[v] = _mm256_load_si256(reinterpret_cast<const __m256i*>(first + 8 * v));
    lane_last[v] = _mm256_load_si256(reinterpret_cast<const __m256i*>(last + 8 * v));
  }
  const int64_t elem = fp8 ? 1 : int64_t(sizeof(T)), row_bytes = d_n * elem;
  // Rows [j0, j0 + n) of a cache into dst ([key][dp]); zeros in rows n..n4 and past d_n.
  auto load_rows = [&](const void* cache, const PagedCacheLayout& layout, float scale, int64_t j0, int n, int n4,
                       float* dst) {
    int64_t block = j0 / layout.block_size, slot = j0 % layout.block_size;
    for (int i = 0; i < n; ++i) {
      widen<T>(cache, layout.offset(table[block], slot, tile.kvh), d_n, a.cache_dtype, fp8_table, scale, dst + i * dp);
      std::fill(dst + i * dp + d_n, dst + (i + 1) * dp, 0.0f);
      if (++slot == layout.block_size) slot = 0, ++block;
    }
    std::fill(dst + n * dp, dst + n4 * dp, 0.0f);
  };
  auto prefetch_rows = [&](const void* cache, const PagedCacheLayout& layout, int64_t j0, int64_t j1) {
    if (j0 > j1) return;
    int64_t block = j0 / layout.block_size, slot = j0 % layout.block_size;
    for (int64_t j = j0; j <= j1; ++j) {
      prefetch_row(cache, layout.offset(table[block], slot, tile.kvh) * elem, row_bytes);
      if (++slot == layout.block_size) slot = 0, ++block;
    }
  };
  const __m256 scale = _mm256_set1_ps(a.scale), neg_inf = _mm256_set1_ps(kNegInf);
  for (int64_t j0 = key_first; j0 <= key_last; j0 += kChunk) {
    const int n = int(std::min<int64_t>(kChunk, key_last - j0 + 1)), n4 = (n + 3) / 4 * 4;
    const int64_t next_last = std::min<int64_t>(j0 + 2 * kChunk - 1, key_last);
    prefetch_rows(a.key_cache, a.key_layout, j0 + kChunk, next_last);
    load_rows(a.key_cache, a.key_layout, ks, j0, n, n4, sc.keys);
    // S = q . k, four keys at a time.
    for (int j = 0; j < n4; j += 4) {
      __m256 acc[4][kVecs];
      for (int i = 0; i < 4; ++i) {
        for (int v = 0; v < kVecs; ++v) acc[i][v] = _mm256_setzero_ps();
      }
      const float* k = sc.keys + j * dp;
      for (int64_t d = 0; d < d_n; ++d) {
        __m256 q[kVecs];
        for (int v = 0; v < kVecs; ++v) q[v] = _mm256_loadu_ps(sc.qt + d * kLanes + 8 * v);
        for (int i = 0; i < 4; ++i) {
          const __m256 b = _mm256_broadcast_ss(k + i * dp + d);
          for (int v = 0; v < kVecs; ++v) acc[i][v] = _mm256_fmadd_ps(b, q[v], acc[i][v]);
        }
      }
      for (int i = 0; i < 4; ++i) {
        for (int v = 0; v < kVecs; ++v) _mm256_storeu_ps(sc.p + (j + i) * kLanes + 8 * v, _mm256_mul_ps(acc[i][v], scale));
      }
    }
    if (a.softcap > 0.0f) {
      for (int i = 0; i < n * kLanes; ++i) sc.p[i] = capped(sc.p[i], a.softcap);
    }
    // Mask, the chunk's maximum (NaN tracked apart: max_ps drops a NaN in its first operand).
    __m256 chunk_max[kVecs], nan[kVecs];
    for (int v = 0; v < kVecs; ++v) chunk_max[v] = neg_inf, nan[v] = _mm256_setzero_ps();
    for (int j = 0; j < n; ++j) {
      const __m256i key = _mm256_set1_epi32(int32_t(j0 + j));
      for (int v = 0; v < kVecs; ++v) {
        const __m256i unseen = _mm256_or_si256(_mm256_cmpgt_epi32(lane_first[v], key), _mm256_cmpgt_epi32(key, lane_last[v]));
        const __m256 seen = _mm256_castsi256_ps(_mm256_xor_si256(unseen, _mm256_set1_epi32(-1)));
        const __m256 s = _mm256_blendv_ps(neg_inf, _mm256_loadu_ps(sc.p + j * kLanes + 8 * v), seen);
        _mm256_storeu_ps(sc.p + j * kLanes + 8 * v, s);
        _mm256_storeu_ps(sc.seen + j * kLanes + 8 * v, seen);
        nan[v] = _mm256_or_ps(nan[v], _mm256_cmp_ps(s, s, _CMP_UNORD_Q));
        chunk_max[v] = _mm256_max_ps(chunk_max[v], s);
      }
    }
    // The running maximum, the rescale factor and the weights.
    __m256 alpha[kVecs];
    bool rescale = false;
    for (int v = 0; v < kVecs; ++v) {
      const __m256 is_nan = _mm256_or_ps(nan[v], _mm256_cmp_ps(m[v], m[v], _CMP_UNORD_Q));
      const __m256 m_new = _mm256_blendv_ps(_mm256_max_ps(m[v], chunk_max[v]), _mm256_set1_ps(std::nanf("")), is_nan);
      // e^(m_old - m_new); 1 while nothing is live (both -inf).
      alpha[v] = _mm256_blendv_ps(exp_nonpositive(_mm256_sub_ps(m[v], m_new)), _mm256_set1_ps(1.0f),
                                  _mm256_cmp_ps(m_new, neg_inf, _CMP_EQ_OQ));
      rescale = rescale || _mm256_movemask_ps(_mm256_cmp_ps(alpha[v], _mm256_set1_ps(1.0f), _CMP_NEQ_UQ)) != 0;
      m[v] = m_new;
      __m256 sum = _mm256_setzero_ps();
      for (int j = 0; j < n; ++j) {
        const __m256 s = _mm256_loadu_ps(sc.p + j * kLanes + 8 * v);
        const __m256 p = _mm256_andnot_ps(_mm256_cmp_ps(s, neg_inf, _CMP_EQ_OQ), exp_nonpositive(_mm256_sub_ps(s, m_new)));
        _mm256_storeu_ps(sc.p + j * kLanes + 8 * v, p);
        sum = _mm256_add_ps(sum, p);
      }
      l[v] = _mm256_add_ps(_mm256_mul_ps(l[v], alpha[v]), sum);
    }
    if (rescale) {
      for (int64_t d = 0; d < d_n; ++d) {
        for (int v = 0; v < kVecs; ++v) {
          float* o = sc.ot + d * kLanes + 8 * v;
          _mm256_storeu_ps(o, _mm256_mul_ps(_mm256_loadu_ps(o), alpha[v]));
        }
      }
    }
    prefetch_rows(a.value_cache, a.value_layout, j0 + kChunk, next_last);
    load_rows(a.value_cache, a.value_layout, vs, j0, n, n, sc.values);
    // acc += p v, four dims at a time; under the mask unless every lane sees every key.
    const bool whole = all_first <= j0 && j0 + n - 1 <= all_last;
    for (int64_t d0 = 0; d0 < dp; d0 += 4) {
      __m256 acc[4][kVecs];
      for (int i = 0; i < 4; ++i) {
        for (int v = 0; v < kVecs; ++v) acc[i][v] = _mm256_loadu_ps(sc.ot + (d0 + i) * kLanes + 8 * v);
      }
      for (int j = 0; j < n; ++j) {
        __m256 p[kVecs];
        for (int v = 0; v < kVecs; ++v) p[v] = _mm256_loadu_ps(sc.p + j * kLanes + 8 * v);
        const float* val = sc.values + j * dp + d0;
        if (whole) {
          for (int i = 0; i < 4; ++i) {
            const __m256 b = _mm256_broadcast_ss(val + i);
            for (int v = 0; v < kVecs; ++v) acc[i][v] = _mm256_fmadd_ps(b, p[v], acc[i][v]);
          }
        } else {
          for (int i = 0; i < 4; ++i) {
            const __m256 b = _mm256_broadcast_ss(val + i);
            for (int v = 0; v < kVecs; ++v) {
              acc[i][v] = _mm256_blendv_ps(acc[i][v], _mm256_fmadd_ps(b, p[v], acc[i][v]),
                                           _mm256_loadu_ps(sc.seen + j * kLanes + 8 * v));
            }
          }
        }
      }
      for (int i = 0; i < 4; ++i) {
        for (int v = 0; v < kVecs; ++v) _mm256_storeu_ps(sc.ot + (d0 + i) * kLanes + 8 * v, acc[i][v]);
      }
    }
  }
  alignas(32) float lsum[kLanes];
  for (int v = 0; v < kVecs; ++v) _mm256_store_ps(lsum + 8 * v, l[v]);
  auto* out = static_cast<T*>(a.out);
  for (int64_t r = 0; r < lanes; ++r) {
    const int64_t t = tile.t0 + r / heads, h = tile.h0 + r % heads;
    T* out_row = out + (t * a.num_heads + h) * d_n;
    for (int64_t d = 0; d < d_n; ++d) {
      out_row[d] = from_float<T>(lsum[r] == 0.0f ? 0.0f : sc.ot[d * kLanes + r] / lsum[r]);
    }
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
  const Tiling tiling = make_tiling(a);
  const int64_t tiles = tiling.count();
  // Tiles dealt round-robin to the parts, so that a causal prefill's cheap early rows and costly
  // late ones spread over the threads.
  parallel_for_at_most(serial ? 1 : num_threads, a.num_parts, 1, [&](int64_t p0, int64_t p1) {
    const TileScratch sc = TileScratch::get(d_n);
    for (int64_t part = p0; part < p1; ++part) {
      for (int64_t i = part; i < tiles; i += a.num_parts) {
        const Tile tile = tiling.tile(a, i);
        if ((tile.t1 - tile.t0) * (tile.h1 - tile.h0) > 8) {  // lanes in two vectors
          attend_tile<T, 2>(a, fp8_table, tile, sc);
        } else {
          attend_tile<T, 1>(a, fp8_table, tile, sc);
        }
      }
    }
  });
}

}  // namespace
}  // namespace fp8kit::ops

#include "ops/avx2_target_end.h"
#endif

namespace fp8kit::ops {

void paged_attention_cpu(const PagedAttentionArgs& args, const Overrides& overrides, int num_threads) {
#if !defined(FP8KIT_ATTENTION_AVX2)
  (void)overrides, (void)num_threads;
  return paged_attention_ref(args);
#else
  if (overrides.cpu_backend == CpuBackend::kReference || args.read_mode != AttentionReadMode::kDequantize ||
      best_cpu_isa() == CpuIsa::kPortable) {
    return paged_attention_ref(args);
  }
  switch (args.dtype) {
    case DType::kBF16: return run<BFloat16>(args, num_threads);
    case DType::kF16: return run<Float16>(args, num_threads);
    default: return run<float>(args, num_threads);
  }
#endif
}

}  // namespace fp8kit::ops
