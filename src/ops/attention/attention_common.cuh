// What the paged-attention kernels share (attention_cuda.cu, attention_simt.cu, attention_mma*.cu):
// the kernels' parameter block, the work items and how an item maps to rows and keys, the cache
// addressing through the block table, and the two small kernels around the attention kernels:
// the schedule (item list, zeroed padding rows) and the combine of split partials.
//
// Metadata is read on the device only, so every value is treated as untrusted: query_start_loc
// entries are clamped into [0, num_tokens] and made non-decreasing per sequence, a sequence with
// seq_len below its q_len or beyond its block table sees no keys (its rows are zeros), a block id
// outside the cache makes its keys invisible; nothing is read or written out of bounds.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/cuda/pdl.cuh"
#include "ops/attention/attention_plan.h"
#include "ops/attention/block_divider.h"
#include "ops/cuda_elements.cuh"

namespace fp8kit::ops::attention_kernels {

constexpr float kNegInf = -__builtin_huge_valf();

// The parameters of every paged-attention kernel (a plain struct: kernels take it by value).
struct AttnParams {
  int64_t num_tokens, num_heads, num_kv_heads, head_size, num_seqs, group;
  const void* q;
  int64_t q_token_stride, q_head_stride;
  void* out;  // [num_tokens, num_heads, head_size], contiguous
  const void* cache[2];  // key, value
  int64_t block_stride[2], page_stride[2], head_stride[2];
  int64_t block_size, num_blocks;
  const float* kv_scale[2];  // fp8: k_scale, v_scale
  int64_t kv_scale_stride;
  const int32_t* query_start_loc;
  const int32_t* seq_lens;
  const int32_t* block_table;
  int64_t block_table_stride, max_blocks_per_seq;
  float scale, softcap;
  int64_t window_left, window_right;
  bool causal;
  const float* q_scale;  // kFp8Compute
  int64_t q_scale_stride;
  // The plan.
  int rows_per_item, splits;
  const int2* items;  // {sequence, chunk}
  const int* item_count;
  float* partial_acc;  // [splits][num_tokens * num_heads][head_size]
  float* partial_ml;   // [splits][num_tokens * num_heads][2]: running max, sum
  bool ml_log2;        // the partial maxima are base-2 logits (the mma kernel), else natural ones
};

// The NaN-propagating max of the online softmax (the reference's running_max): a NaN logit
// becomes the maximum and stays, so it reaches the output.
__device__ __forceinline__ float nan_max(float m, float s) { return (s > m || isnan(s)) ? s : m; }

__device__ __forceinline__ float capped(float s, float softcap) {
  return softcap > 0.0f ? __fmul_rn(softcap, tanhf(__fdiv_rn(s, softcap))) : s;
}

// One item: up to rows_per_item packed rows (token i, group head g) -> i * G + g of one sequence.
struct Item {
  int64_t seq, q_start, q_len, seq_len, ctx;
  int64_t row0, rows;  // the item's packed rows [row0, row0 + rows)
  bool valid;          // the metadata of the sequence is usable (else the rows are zeros)
  const int32_t* table;
};

__device__ __forceinline__ Item resolve_item(const AttnParams& p, int2 item) {
  Item it;
  it.seq = item.x;
  const int64_t t = p.num_tokens;
  const int64_t q0 = __ldg(p.query_start_loc + it.seq), q1 = __ldg(p.query_start_loc + it.seq + 1);
  it.q_start = q0 < 0 ? 0 : (q0 > t ? t : q0);
  const int64_t q_end = q1 < it.q_start ? it.q_start : (q1 > t ? t : q1);
  it.q_len = q_end - it.q_start;
  it.seq_len = __ldg(p.seq_lens + it.seq);
  it.valid = it.seq_len >= it.q_len && it.seq_len <= p.max_blocks_per_seq * p.block_size;
  it.ctx = it.seq_len - it.q_len;
  it.row0 = int64_t(item.y) * p.rows_per_item;
  const int64_t left = it.q_len * p.group - it.row0;
  it.rows = left < p.rows_per_item ? (left < 0 ? 0 : left) : p.rows_per_item;
  it.table = p.block_table + it.seq * p.block_table_stride;
  return it;
}

// The keys [first, last] query position `pos` sees (the reference's visible_keys); empty when the
// sequence is not valid.
struct KeyRange {
  int64_t first, last;
};
__device__ __forceinline__ KeyRange visible_keys(const AttnParams& p, const Item& it, int64_t pos) {
  KeyRange k{0, it.valid ? it.seq_len - 1 : -1};
  if (p.window_left >= 0) k.first = pos - p.window_left > 0 ? pos - p.window_left : 0;
  if (p.window_right >= 0 && pos + p.window_right < k.last) k.last = pos + p.window_right;
  if (p.causal && pos < k.last) k.last = pos;
  return k;
}
// The position of packed row `row` of the item.
__device__ __forceinline__ int64_t row_position(const AttnParams& p, const Item& it, int64_t row) {
  return it.ctx + (it.row0 + row) / p.group;
}
// The union of the visible ranges of the item's rows (positions grow with the row, and so do both
// ends of the range).
__device__ __forceinline__ KeyRange item_keys(const AttnParams& p, const Item& it) {
  if (it.rows <= 0 || !it.valid) return {0, -1};
  const KeyRange a = visible_keys(p, it, row_position(p, it, 0));
  const KeyRange b = visible_keys(p, it, row_position(p, it, it.rows - 1));
  return {a.first, b.last};
}
// The keys of split `split`: the item's range cut into `splits` pieces of whole `granule`s.
__device__ __forceinline__ KeyRange split_keys(const KeyRange& all, int split, int splits, int64_t granule) {
  const int64_t n = all.last - all.first + 1;
  if (n <= 0) return {0, -1};
  int64_t per = (n + splits - 1) / splits;
  per = (per + granule - 1) / granule * granule;
  const int64_t first = all.first + int64_t(split) * per;
  const int64_t last = first + per - 1 < all.last ? first + per - 1 : all.last;
  return {first, last};
}

// Key positions over the block size without a division or a branch (block_divider.h, whose
// quotient is the one tested on the CPU). A 64-bit division per key costs more than the
// tensor-core math of its tile, and a shift-or-divide branch per key doubled the kernels' address
// code.
struct BlockDivider {
  int bs;
  BlockDividerMagic d;
  __device__ explicit BlockDivider(int64_t block_size)
      : bs(int(block_size)), d(block_divider_magic(uint32_t(block_size))) {}
  __device__ __forceinline__ int block(int j) const { return int(block_divider_quotient(uint32_t(j), d)); }
  __device__ __forceinline__ int slot(int j) const { return j - block(j) * bs; }
};

// Element offset of key/value `j` of KV head `kvh` (which = 0: K, 1: V), or -1 when its block
// id is outside the cache.
__device__ __forceinline__ int64_t cache_offset(const AttnParams& p, const Item& it, int which, int64_t j,
                                                int64_t kvh) {
  const int64_t b = j / p.block_size;
  const int64_t block = __ldg(it.table + b);
  if (block < 0 || block >= p.num_blocks) return -1;
  return block * p.block_stride[which] + (j % p.block_size) * p.page_stride[which] + kvh * p.head_stride[which];
}

// Where packed row `row` of the item writes: (token row, head) -> the flat row t * H + h.
__device__ __forceinline__ int64_t out_row(const AttnParams& p, const Item& it, int64_t row, int64_t kvh) {
  const int64_t packed = it.row0 + row;
  return (it.q_start + packed / p.group) * p.num_heads + kvh * p.group + packed % p.group;
}

// ---- the schedule ---------------------------------------------------------------------------
// Block 0 lists the items ({sequence, chunk} for every chunk of rows_per_item packed rows of
// every sequence, in order) and their count; the other blocks zero the padding rows of out
// (rows past query_start_loc[num_seqs]). Launched with kScheduleThreads threads.
constexpr int kScheduleThreads = 1024;

template <typename T>
__global__ void __launch_bounds__(kScheduleThreads) attention_schedule_kernel(const AttnParams p, int2* items,
                                                                              int* item_count, int64_t items_bound) {
  cuda::pdl_wait();
  cuda::pdl_allow_dependents();
  if (blockIdx.x > 0) {
    const int64_t last = __ldg(p.query_start_loc + p.num_seqs);
    const int64_t first_pad = last < 0 ? 0 : (last > p.num_tokens ? p.num_tokens : last);
    const int64_t row = p.num_heads * p.head_size;
    T* out = static_cast<T*>(p.out);
    const int64_t n = (p.num_tokens - first_pad) * row;
    for (int64_t i = int64_t(blockIdx.x - 1) * kScheduleThreads + threadIdx.x; i < n;
         i += int64_t(gridDim.x - 1) * kScheduleThreads) {
      out[first_pad * row + i] = elements::narrow<T>(0.0f);
    }
    return;
  }
  __shared__ int64_t warp_sums[kScheduleThreads / 32];
  __shared__ int64_t base;
  if (threadIdx.x == 0) base = 0;
  __syncthreads();
  for (int64_t r0 = 0; r0 < p.num_seqs; r0 += kScheduleThreads) {
    const int64_t r = r0 + threadIdx.x;
    int64_t chunks = 0;
    if (r < p.num_seqs) {
      const int64_t q0 = p.query_start_loc[r], q1 = p.query_start_loc[r + 1];
      const int64_t start = q0 < 0 ? 0 : (q0 > p.num_tokens ? p.num_tokens : q0);
      const int64_t end = q1 < start ? start : (q1 > p.num_tokens ? p.num_tokens : q1);
      chunks = ((end - start) * p.group + p.rows_per_item - 1) / p.rows_per_item;
    }
    // Exclusive scan of the chunk counts over the block: lanes, then warps.
    int64_t incl = chunks;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
    for (int o = 1; o < 32; o *= 2) {
      const int64_t v = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += v;
    }
    if (lane == 31) warp_sums[warp] = incl;
    __syncthreads();
    int64_t before = base;
    for (int w = 0; w < warp; ++w) before += warp_sums[w];
    const int64_t first = before + incl - chunks;
    for (int64_t c = 0; c < chunks; ++c) {
      if (first + c < items_bound) items[first + c] = make_int2(int(r), int(c));
    }
    __syncthreads();
    if (threadIdx.x == kScheduleThreads - 1) base = first + chunks;
    __syncthreads();
  }
  if (threadIdx.x == 0) *item_count = int(base < items_bound ? base : items_bound);
}

// ---- the combine of split partials ----------------------------------------------------------
// out[row, d] = T(sum_s acc_s[d] e^(m_s - M) / sum_s l_s e^(m_s - M)), M = max_s m_s (NaN wins);
// zeros where no split saw a key. One warp per (token, head) row; rows past the real tokens
// (query_start_loc[num_seqs]) are the schedule's zeros and are skipped. The lanes load the
// splits' states side by side (two a lane) and each split's factor is computed once; the sums
// over the splits then run in split order, as a sequential loop would form them, with the
// partials' loads of several splits in flight (a lane's dims as one vector where the head size
// allows): a long sequence's many splits wait on one load round trip, not one a split.
constexpr int kCombineThreads = 256;
constexpr int kCombineSplitsPerLane = 2;
static_assert(kAttentionMaxSplits <= 32 * kCombineSplitsPerLane, "the combine's splits a lane");

__device__ __forceinline__ float rescale(const AttnParams& p, float m_split, float m) {
  return p.ml_log2 ? exp2f(m_split - m) : expf(m_split - m);
}

// Lane `lane`'s kVec dims from d0 (kVec consecutive dims, or kVec = 1: dim d0 + lane) of row
// `row`, combined over the splits with factors factor_s[s] (the splits of `seen` only).
template <typename T, int kVec>
__device__ __forceinline__ void combine_dims(const AttnParams& p, int64_t row, int64_t all_rows, int64_t d, float m,
                                             float l, uint64_t seen, const float* factor_s) {
  float acc[kVec];
#pragma unroll
  for (int k = 0; k < kVec; ++k) acc[k] = 0.0f;
#pragma unroll 8
  for (int s = 0; s < p.splits; ++s) {
    if (((seen >> s) & 1u) == 0) continue;  // the split saw no key of this row
    const float* src = p.partial_acc + (int64_t(s) * all_rows + row) * p.head_size + d;
    float v[kVec];
    if constexpr (kVec == 4) {
      const float4 x = __ldg(reinterpret_cast<const float4*>(src));
      v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
    } else if constexpr (kVec == 2) {
      const float2 x = __ldg(reinterpret_cast<const float2*>(src));
      v[0] = x.x, v[1] = x.y;
    } else {
      v[0] = __ldg(src);
    }
#pragma unroll
    for (int k = 0; k < kVec; ++k) acc[k] = __fadd_rn(acc[k], __fmul_rn(v[k], factor_s[s]));
  }
  T* out = static_cast<T*>(p.out) + row * p.head_size + d;
#pragma unroll
  for (int k = 0; k < kVec; ++k) out[k] = elements::narrow<T>(m == kNegInf || l == 0.0f ? 0.0f : __fdiv_rn(acc[k], l));
}

template <typename T>
__global__ void __launch_bounds__(kCombineThreads) attention_combine_kernel(const AttnParams p) {
  cuda::pdl_wait();
  cuda::pdl_allow_dependents();
  __shared__ float factor_all[kCombineThreads / 32][kAttentionMaxSplits];  // a warp's row's e^(m_s - M)
  __shared__ float term_all[kCombineThreads / 32][kAttentionMaxSplits];    // l_s e^(m_s - M)
  const int64_t last = __ldg(p.query_start_loc + p.num_seqs);
  const int64_t real_rows = (last < 0 ? 0 : (last > p.num_tokens ? p.num_tokens : last)) * p.num_heads;
  const int64_t all_rows = p.num_tokens * p.num_heads;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float* factor_s = factor_all[warp];
  float* term_s = term_all[warp];
  for (int64_t row = (int64_t(blockIdx.x) * kCombineThreads + threadIdx.x) / 32; row < real_rows;
       row += int64_t(gridDim.x) * (kCombineThreads / 32)) {
    float ms[kCombineSplitsPerLane], ls[kCombineSplitsPerLane];
    float m = kNegInf;
#pragma unroll
    for (int k = 0; k < kCombineSplitsPerLane; ++k) {
      const int s = lane + 32 * k;
      ms[k] = s < p.splits ? __ldg(p.partial_ml + (int64_t(s) * all_rows + row) * 2) : kNegInf;
      ls[k] = s < p.splits ? __ldg(p.partial_ml + (int64_t(s) * all_rows + row) * 2 + 1) : 0.0f;
      m = nan_max(m, ms[k]);
    }
#pragma unroll
    for (int o = 16; o > 0; o /= 2) m = nan_max(m, __shfl_xor_sync(0xffffffffu, m, o));
    uint64_t seen = 0;
#pragma unroll
    for (int k = 0; k < kCombineSplitsPerLane; ++k) {
      const bool saw = ms[k] != kNegInf;
      const float f = saw ? rescale(p, ms[k], m) : 0.0f;
      factor_s[lane + 32 * k] = f;
      term_s[lane + 32 * k] = __fmul_rn(ls[k], f);
      seen |= uint64_t(__ballot_sync(0xffffffffu, saw)) << (32 * k);
    }
    __syncwarp();
    float l = 0.0f;
    for (int s = 0; s < p.splits; ++s) {
      if ((seen >> s) & 1u) l = __fadd_rn(l, term_s[s]);
    }
    if (p.head_size % 128 == 0) {
      for (int64_t d = 4 * lane; d < p.head_size; d += 128) combine_dims<T, 4>(p, row, all_rows, d, m, l, seen, factor_s);
    } else if (p.head_size % 64 == 0) {
      for (int64_t d = 2 * lane; d < p.head_size; d += 64) combine_dims<T, 2>(p, row, all_rows, d, m, l, seen, factor_s);
    } else {
      for (int64_t d = lane; d < p.head_size; d += 32) combine_dims<T, 1>(p, row, all_rows, d, m, l, seen, factor_s);
    }
    __syncwarp();  // the factors are read before the next row's
  }
}

}  // namespace fp8kit::ops::attention_kernels
