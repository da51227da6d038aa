// paged_attention on CUDA cores (the plan's kSimt): every query dtype, cache format and head size
// up to 512, both read modes; the decode path of f32 queries and of the fp8 compute read mode.
// Reference: attention_ref.cpp (same PagedAttentionArgs through AttnParams).
//
// A block of 128 threads serves one item (up to 16 packed rows of one sequence, one KV head) and
// one key split, in tiles of 128 keys: thread t computes the 16 rows' logits of key t of the tile
// (K dequantized in registers, products and sums in f32 in d order: the reference's dot), the
// tile's softmax statistics are reduced per row (8 threads a row), then each thread accumulates
// P.V for 4 consecutive elements of d over a strided share of the tile's keys, adding key j to row
// r only where r sees j (so a NaN or inf in a key reaches exactly the rows the reference lets it
// reach). kDequantize keeps the online softmax per tile (running max, rescaled sum and output);
// kFp8Compute (one split) first finds each row's maximum logit over all its keys, then forms
// P~ = exp2(x - (max - 8)), sums it unrounded, and accumulates e4m3(P~) times the raw e4m3 V, as
// the reference's one-tile emulation does. Differences from the reference are f32 rounding only
// (the order of the softmax sums, CUDA's expf / exp2f / tanhf), covered by the tests' bounds.
// Floor: the KV bytes of the visible keys over the bandwidth (decode) - this kernel is the general
// fallback; the tensor-core kernel (attention_mma.cuh) is the fast path of 16-bit queries.
// Tests: tests/gpu/test_attention_cuda.cpp (FP8KIT_ATTENTION_KERNEL=simt cases).
#include "ops/attention/attention_common.cuh"
#include "ops/attention/attention_launch.h"
#include "ops/cuda_launch.cuh"
#include "ops/kv_cache/kv_cache_codec.cuh"

namespace fp8kit::ops::attention_kernels {
namespace {

using elements::narrow;
using elements::widen;

constexpr int kThreads = 128;
constexpr int kRows = 16;   // packed rows of an item (the plan's rows_per_item for kSimt)
constexpr int kKeys = 128;  // keys of a tile: one per thread
constexpr int kChunk = 8;   // elements of a key row loaded at a time

enum class Cache { kModel, kFp8 };  // elements of T, or FP8 bytes (e4m3fn or e5m2 at run time)

// Elements [d0, d0 + kChunk) of a cache row as f32 (raw FP8 values, before any scale); past
// `n` valid ones, zeros. `vector`: the row chunk is aligned for one wide load.
template <typename T, Cache kCache>
__device__ __forceinline__ void load_chunk(const void* base, int64_t at, int n, bool vector, bool e5m2,
                                           float (&x)[kChunk]) {
  if constexpr (kCache == Cache::kFp8) {
    const uint8_t* p = static_cast<const uint8_t*>(base) + at;
    if (vector && n == kChunk) {
      const uint2 w = __ldg(reinterpret_cast<const uint2*>(p));
#pragma unroll
      for (int e = 0; e < 4; ++e) x[e] = kv_codec::decode(w.x >> (8 * e), e5m2);
#pragma unroll
      for (int e = 0; e < 4; ++e) x[4 + e] = kv_codec::decode(w.y >> (8 * e), e5m2);
    } else {
#pragma unroll
      for (int e = 0; e < kChunk; ++e) x[e] = e < n ? kv_codec::decode(p[e], e5m2) : 0.0f;
    }
  } else {
    const T* p = static_cast<const T*>(base) + at;
    if (vector && n == kChunk) {
      if constexpr (sizeof(T) == 2) {
        const uint4 w = __ldg(reinterpret_cast<const uint4*>(p));
        elements::widen_pair<T>(w.x, x[0], x[1]);
        elements::widen_pair<T>(w.y, x[2], x[3]);
        elements::widen_pair<T>(w.z, x[4], x[5]);
        elements::widen_pair<T>(w.w, x[6], x[7]);
      } else {
        const float4 a = __ldg(reinterpret_cast<const float4*>(p)), b = __ldg(reinterpret_cast<const float4*>(p) + 1);
        x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
      }
    } else {
#pragma unroll
      for (int e = 0; e < kChunk; ++e) x[e] = e < n ? widen(p[e]) : 0.0f;
    }
  }
}

// Elements [d0, d0 + 4) of a cache row as f32 (raw), zeros past n.
template <typename T, Cache kCache>
__device__ __forceinline__ void load_quad(const void* base, int64_t at, int n, bool vector, bool e5m2,
                                          float (&x)[4]) {
  if constexpr (kCache == Cache::kFp8) {
    const uint8_t* p = static_cast<const uint8_t*>(base) + at;
    if (vector && n == 4) {
      const uint32_t w = __ldg(reinterpret_cast<const uint32_t*>(p));
#pragma unroll
      for (int e = 0; e < 4; ++e) x[e] = kv_codec::decode(w >> (8 * e), e5m2);
    } else {
#pragma unroll
      for (int e = 0; e < 4; ++e) x[e] = e < n ? kv_codec::decode(p[e], e5m2) : 0.0f;
    }
  } else {
    const T* p = static_cast<const T*>(base) + at;
    if (vector && n == 4) {
      if constexpr (sizeof(T) == 2) {
        const uint2 w = __ldg(reinterpret_cast<const uint2*>(p));
        elements::widen_pair<T>(w.x, x[0], x[1]);
        elements::widen_pair<T>(w.y, x[2], x[3]);
      } else {
        const float4 a = __ldg(reinterpret_cast<const float4*>(p));
        x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w;
      }
    } else {
#pragma unroll
      for (int e = 0; e < 4; ++e) x[e] = e < n ? widen(p[e]) : 0.0f;
    }
  }
}

// The 16 rows' logits of key j: s_r = capped(dot_r * scale) (kDequantize, dot over q . k^ with
// k^ = raw * k_scale) or x_r = capped(raw_dot_r * alpha) * log2(e) (kFp8Compute); -inf for rows
// that do not see j and for keys of blocks outside the cache.
template <typename T, Cache kCache, bool kFp8Compute>
__device__ __forceinline__ void key_logits(const AttnParams& p, const Item& it, int64_t kvh, int64_t j,
                                           const float* q_s, int dp, const int64_t* first, const int64_t* last,
                                           float k_scale, float alpha, bool vector, bool e5m2, float (&s)[kRows]) {
  const int64_t at = cache_offset(p, it, 0, j, kvh);
#pragma unroll
  for (int r = 0; r < kRows; ++r) s[r] = 0.0f;
  if (at >= 0) {
    for (int64_t d0 = 0; d0 < p.head_size; d0 += kChunk) {
      float k[kChunk];
      const int n = p.head_size - d0 < kChunk ? int(p.head_size - d0) : kChunk;
      load_chunk<T, kCache>(p.cache[0], at + d0, n, vector, e5m2, k);
      if constexpr (kCache == Cache::kFp8 && !kFp8Compute) {
#pragma unroll
        for (int e = 0; e < kChunk; ++e) k[e] = __fmul_rn(k[e], k_scale);
      }
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const float4 qa = *reinterpret_cast<const float4*>(q_s + r * dp + d0);
        const float4 qb = *reinterpret_cast<const float4*>(q_s + r * dp + d0 + 4);
        const float qv[kChunk] = {qa.x, qa.y, qa.z, qa.w, qb.x, qb.y, qb.z, qb.w};
#pragma unroll
        for (int e = 0; e < kChunk; ++e) {
          if (e < n) s[r] = __fadd_rn(s[r], __fmul_rn(qv[e], k[e]));
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const bool seen = at >= 0 && j >= first[r] && j <= last[r];
    float v;
    if constexpr (kFp8Compute) {
      v = __fmul_rn(capped(__fmul_rn(s[r], alpha), p.softcap), 1.44269504088896340736f);
    } else {
      v = capped(__fmul_rn(s[r], p.scale), p.softcap);
    }
    s[r] = seen ? v : kNegInf;
  }
}

template <typename T, Cache kCache, bool kFp8Compute>
__global__ void __launch_bounds__(kThreads) paged_attention_simt_kernel(const AttnParams p, bool vector, bool e5m2) {
  cuda::pdl_wait();
  cuda::pdl_allow_dependents();
  if (int(blockIdx.x) >= *p.item_count) return;
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  const int dp = int((p.head_size + kChunk - 1) / kChunk * kChunk);  // q rows padded with zeros
  float* q_s = smem;                 // [kRows][dp]
  float* s_s = smem + kRows * dp;    // [kRows][kKeys]: logits, then weights
  __shared__ int64_t first[kRows], last[kRows];
  __shared__ float m_s[kRows], l_s[kRows], corr_s[kRows];
  __shared__ float warp_max[kThreads / 32][kRows];

  const Item it = resolve_item(p, p.items[blockIdx.x]);
  const int64_t kvh = blockIdx.y;
  const int tid = threadIdx.x;
  const bool fp8 = kCache == Cache::kFp8;
  const float k_scale = fp8 ? __ldg(p.kv_scale[0] + kvh * p.kv_scale_stride) : 1.0f;
  const float v_scale = fp8 ? __ldg(p.kv_scale[1] + kvh * p.kv_scale_stride) : 1.0f;
  float q_inv = 1.0f, alpha = 0.0f;
  if constexpr (kFp8Compute) {
    const float q_descale = __ldg(p.q_scale + kvh * p.q_scale_stride);  // query heads of group kvh share it
    q_inv = __fdiv_rn(1.0f, q_descale);
    alpha = __fmul_rn(__fmul_rn(p.scale, q_descale), k_scale);
  }
  if (tid < kRows) {
    KeyRange k{0, -1};
    if (tid < it.rows) k = visible_keys(p, it, row_position(p, it, tid));
    first[tid] = k.first, last[tid] = k.last;
    m_s[tid] = kNegInf, l_s[tid] = 0.0f, corr_s[tid] = 1.0f;
  }
  for (int i = tid; i < kRows * dp; i += kThreads) {
    const int r = i / dp, d = i % dp;
    float v = 0.0f;
    if (r < it.rows && d < p.head_size) {
      const int64_t packed = it.row0 + r;
      const int64_t t = it.q_start + packed / p.group, h = kvh * p.group + packed % p.group;
      v = widen(static_cast<const T*>(p.q)[t * p.q_token_stride + h * p.q_head_stride + d]);
      if constexpr (kFp8Compute) {  // vLLM's static query quantization: NaN -> +448
        const float y = fmaxf(-448.0f, fminf(__fmul_rn(v, q_inv), 448.0f));
        v = e4m3fn_bits_to_float(float_to_e4m3fn_bits(y));
      }
    }
    q_s[i] = v;
  }
  __syncthreads();
  const KeyRange keys = split_keys(item_keys(p, it), blockIdx.z, p.splits, kKeys);

  if constexpr (kFp8Compute) {  // pass 1: every row's maximum logit over all its keys
    float mx[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) mx[r] = kNegInf;
    for (int64_t j = keys.first + tid; j <= keys.last; j += kThreads) {
      float s[kRows];
      key_logits<T, kCache, true>(p, it, kvh, j, q_s, dp, first, last, k_scale, alpha, vector, e5m2, s);
#pragma unroll
      for (int r = 0; r < kRows; ++r) mx[r] = nan_max(mx[r], s[r]);
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
#pragma unroll
      for (int o = 16; o > 0; o /= 2) mx[r] = nan_max(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], o));
    }
    if (tid % 32 == 0) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) warp_max[tid / 32][r] = mx[r];
    }
    __syncthreads();
    if (tid < kRows) {
      float m = kNegInf;
      for (int w = 0; w < kThreads / 32; ++w) m = nan_max(m, warp_max[w][tid]);
      m_s[tid] = m;
    }
    __syncthreads();
  }

  // P.V roles: 4 consecutive elements of d (quad), keys strided by the number of key lanes.
  const int quads = int((p.head_size + 3) / 4);
  const int key_lanes = kThreads / quads;  // >= 1 for head sizes up to 512
  const int quad = tid % quads, key_lane = tid / quads;
  const bool pv_active = key_lane < key_lanes;
  float acc[kRows][4];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[r][e] = 0.0f;
  }

  for (int64_t tile0 = keys.first; tile0 <= keys.last; tile0 += kKeys) {
    {  // logits of key tile0 + tid
      float s[kRows];
      const int64_t j = tile0 + tid;
      if (j <= keys.last) {
        key_logits<T, kCache, kFp8Compute>(p, it, kvh, j, q_s, dp, first, last, k_scale, alpha, vector, e5m2, s);
      } else {
#pragma unroll
        for (int r = 0; r < kRows; ++r) s[r] = kNegInf;
      }
#pragma unroll
      for (int r = 0; r < kRows; ++r) s_s[r * kKeys + tid] = s[r];
    }
    __syncthreads();
    {  // the tile's softmax statistics: 8 threads a row, 16 keys each
      const int r = tid / 8, sub = tid % 8;
      float* row = s_s + r * kKeys + sub * 16;
      const float m_old = m_s[r];
      float m_new = m_old;
      if constexpr (!kFp8Compute) {
        float tile_max = kNegInf;
#pragma unroll
        for (int k = 0; k < 16; ++k) tile_max = nan_max(tile_max, row[k]);
#pragma unroll
        for (int o = 4; o > 0; o /= 2) tile_max = nan_max(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, o));
        m_new = nan_max(m_old, tile_max);
      }
      float sum = 0.0f;
#pragma unroll
      for (int k = 0; k < 16; ++k) {
        float w;
        if constexpr (kFp8Compute) {  // P~ in (0, 256] against the row's maximum; e4m3(P~) for P.V
          const float pt = (row[k] == kNegInf || m_new == kNegInf) ? 0.0f : exp2f(row[k] - (m_new - 8.0f));
          sum = __fadd_rn(sum, pt);
          w = e4m3fn_bits_to_float(float_to_e4m3fn_bits(pt));
        } else {
          w = (row[k] == kNegInf || m_new == kNegInf) ? 0.0f : expf(row[k] - m_new);
          sum = __fadd_rn(sum, w);
        }
        row[k] = w;
      }
#pragma unroll
      for (int o = 4; o > 0; o /= 2) sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffffu, sum, o));
      __syncwarp();
      if (sub == 0) {
        const float corr = kFp8Compute || m_new == kNegInf ? 1.0f : expf(m_old - m_new);
        l_s[r] = __fadd_rn(__fmul_rn(l_s[r], corr), sum);
        m_s[r] = m_new;
        corr_s[r] = corr;
      }
    }
    __syncthreads();
    if (pv_active) {
      if constexpr (!kFp8Compute) {
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          const float c = corr_s[r];
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[r][e] = __fmul_rn(acc[r][e], c);
        }
      }
      const int64_t d0 = int64_t(quad) * 4;
      const int n = p.head_size - d0 < 4 ? int(p.head_size - d0) : 4;
      for (int k = key_lane; k < kKeys; k += key_lanes) {
        const int64_t j = tile0 + k;
        if (j > keys.last) break;
        const int64_t at = cache_offset(p, it, 1, j, kvh);
        if (at < 0) continue;
        float v[4];
        load_quad<T, kCache>(p.cache[1], at + d0, n, vector, e5m2, v);
        if constexpr (kCache == Cache::kFp8 && !kFp8Compute) {
#pragma unroll
          for (int e = 0; e < 4; ++e) v[e] = __fmul_rn(v[e], v_scale);
        }
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          if (j >= first[r] && j <= last[r]) {
            const float w = s_s[r * kKeys + k];
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[r][e] = __fadd_rn(acc[r][e], __fmul_rn(w, v[e]));
          }
        }
      }
    }
    __syncthreads();  // s_s is rewritten by the next tile
  }

  // Sum the key lanes' accumulators (the shared buffer is free now), then write.
  float* red = smem;  // [kThreads][kRows][4]
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int e = 0; e < 4; ++e) red[(tid * kRows + r) * 4 + e] = acc[r][e];
  }
  __syncthreads();
  const int64_t all_rows = p.num_tokens * p.num_heads;
  for (int i = tid; i < it.rows * quads * 4; i += kThreads) {
    const int r = i / (quads * 4), dq = i % (quads * 4);
    if (dq >= p.head_size) continue;
    const int qd = dq / 4, e = dq % 4;
    float a = 0.0f;
    for (int kl = 0; kl < key_lanes; ++kl) a = __fadd_rn(a, red[((kl * quads + qd) * kRows + r) * 4 + e]);
    const int64_t row = out_row(p, it, r, kvh);
    const float l = l_s[r], m = m_s[r];
    if (p.splits > 1) {
      p.partial_acc[(int64_t(blockIdx.z) * all_rows + row) * p.head_size + dq] = a;
      if (dq == 0) {
        p.partial_ml[(int64_t(blockIdx.z) * all_rows + row) * 2] = m;
        p.partial_ml[(int64_t(blockIdx.z) * all_rows + row) * 2 + 1] = l;
      }
    } else {
      float o;
      if constexpr (kFp8Compute) {
        o = m == kNegInf ? 0.0f : __fmul_rn(a, __fmul_rn(__fdiv_rn(1.0f, l), v_scale));
      } else {
        o = l == 0.0f ? 0.0f : __fdiv_rn(a, l);
      }
      static_cast<T*>(p.out)[row * p.head_size + dq] = narrow<T>(o);
    }
  }
}

template <typename T, Cache kCache, bool kFp8Compute>
void launch(const AttnParams& p, int64_t items_bound, bool vector, bool e5m2, cudaStream_t stream) {
  constexpr auto kernel = paged_attention_simt_kernel<T, kCache, kFp8Compute>;
  const int dp = int((p.head_size + kChunk - 1) / kChunk * kChunk);
  const size_t smem = sizeof(float) * size_t(std::max(kRows * dp + kRows * kKeys, kThreads * kRows * 4));
  const dim3 grid(unsigned(items_bound), unsigned(p.num_kv_heads), unsigned(p.splits));
  cuda::launch_pdl(kernel, grid, kThreads, smem, stream, p, vector, e5m2);
  FP8KIT_CHECK_LAUNCH(stream, "paged_attention_simt_kernel");
}

}  // namespace

void launch_attention_simt(const AttnParams& p, const AttentionLaunch& l, cudaStream_t stream) {
  const bool e5m2 = l.cache_dtype == KvCacheDtype::kFp8E5M2;
  const bool fp8 = l.cache_dtype != KvCacheDtype::kAuto;
  cuda_launch::dispatch_float(l.dtype, [&](auto t) {
    using T = decltype(t);
    if (!fp8) return launch<T, Cache::kModel, false>(p, l.items_bound, l.cache_vector, e5m2, stream);
    if (l.read_mode == AttentionReadMode::kFp8Compute) {
      return launch<T, Cache::kFp8, true>(p, l.items_bound, l.cache_vector, e5m2, stream);
    }
    launch<T, Cache::kFp8, false>(p, l.items_bound, l.cache_vector, e5m2, stream);
  });
}

}  // namespace fp8kit::ops::attention_kernels
