// __global__ kernels of moe_align_block_size (reference: moe_align_ref.cpp, same MoeAlignArgs).
// moe_align_kernel, one block: each warp owns a contiguous range of the flat slots and counts its
// experts into its own shared-memory histogram; the histograms become per-warp write offsets and
// the padded segment starts (a scan over experts), with the expert of every block and the
// padding sentinels. Then each range's slots are placed, 32 at a time, ranking equal experts
// inside the warp with __match_any_sync: by the block's own warps (`place`), or, for many slots,
// by moe_align_place_kernel, one block of one warp per range, from the offsets the first kernel
// leaves in warp_offsets (one multiprocessor placing 32768 slots took ~35 us of the 48 a single
// block needed). Ranges ascend with the warp index and ranks with the lane, so each segment lists
// its slots in ascending order, the reference's order. The ids are read in chunks of 16 a lane,
// all loads of a chunk in flight together. Floor: numel * 4-8 bytes read twice plus max_padded *
// 4 written (< 1 MB at M = 8192, topk = 8), i.e. latency-bound at a few microseconds.
// Tests: tests/gpu/test_moe_routing_cuda.cpp.
#pragma once

#include <cstdint>

#include "ops/moe/routing_args.h"
#include "ops/moe/routing_math.h"

namespace fp8kit::ops::kernels {

constexpr int kAlignIdsPerLane = 16;

// The experts of slots base + 32 j + lane (j < kAlignIdsPerLane) below end, -1 past it and for an
// id out of range (the reference rejects those; skipped here). Typed ids and 32-bit indices: the
// loads are most of the block's instructions, and the block is latency-bound on one multiprocessor.
template <typename IdT>
__device__ __forceinline__ void align_load_chunk(const MoeAlignArgs& a, int base, int end, int lane,
                                                 int (&x)[kAlignIdsPerLane]) {
  const IdT* ids = static_cast<const IdT*>(a.topk_ids);
  const uint32_t e = uint32_t(a.num_experts);
#pragma unroll
  for (int j = 0; j < kAlignIdsPerLane; ++j) {
    const int i = base + 32 * j + lane;
    const IdT id = i < end ? ids[i] : IdT(-1);
    // Negative ids wrap to large unsigned values: one compare rejects both ends.
    x[j] = uint64_t(id) < e ? int(id) : -1;
  }
}

// One warp places a loaded chunk (the slots base + 32 j + lane); next[x] is where its next slot
// of expert x goes.
__device__ __forceinline__ void align_place_chunk(const MoeAlignArgs& a, int base, int lane,
                                                  const int (&xs)[kAlignIdsPerLane], int32_t* next) {
  constexpr unsigned kFull = 0xffffffffu;
#pragma unroll
  for (int j = 0; j < kAlignIdsPerLane; ++j) {
    const int x = xs[j];
    const unsigned peers = __match_any_sync(kFull, x);
    if (x >= 0) {
      const unsigned lower = peers & ((1u << lane) - 1u);
      a.sorted_token_ids[next[x] + __popc(lower)] = base + 32 * j + lane;
    }
    __syncwarp();
    if (x >= 0 && lane == __ffs(peers) - 1) next[x] += __popc(peers);
    __syncwarp();
  }
}

// One warp places the slots [begin, end).
template <typename IdT>
__device__ __forceinline__ void align_place_range(const MoeAlignArgs& a, int begin, int end, int lane, int32_t* next) {
  for (int base = begin; base < end; base += 32 * kAlignIdsPerLane) {
    int xs[kAlignIdsPerLane];
    align_load_chunk<IdT>(a, base, end, lane, xs);
    align_place_chunk(a, base, lane, xs, next);
  }
}

// The range of warp `warp` of `warps` over numel slots (both kernels split alike).
__device__ __forceinline__ void align_range(int numel, int warp, int warps, int& begin, int& end) {
  const int per_warp = ((numel + warps - 1) / warps + 31) / 32 * 32;
  begin = min(numel, warp * per_warp);
  end = min(numel, begin + per_warp);
}

// Shared memory: hist[warps][E] then start[E + 1], all i32.
__host__ __device__ inline int64_t moe_align_shared_bytes(int64_t warps, int64_t e) { return (warps * e + e + 1) * 4; }

template <typename IdT>
__global__ void moe_align_kernel(MoeAlignArgs a, bool place) {
  extern __shared__ __align__(16) int32_t shared_i32[];
  constexpr unsigned kFull = 0xffffffffu;
  const int e = int(a.num_experts), bs = int(a.block_size), numel = int(a.numel);
  const int tid = int(threadIdx.x), threads = int(blockDim.x);
  const int lane = tid % 32, warp = tid / 32, warps = threads / 32;
  int32_t* hist = shared_i32;           // [warps][e]: counts, then this warp's next offset in the segment
  int32_t* start = shared_i32 + warps * e;  // [e + 1]: padded segment starts, start[e] = total

  for (int i = tid; i < warps * e; i += threads) hist[i] = 0;
  __syncthreads();
  int begin = 0, end = 0;
  align_range(numel, warp, warps, begin, end);
  // A range of one chunk (always, when the block places the slots itself) keeps its experts in
  // registers for the placement instead of loading them again.
  const bool one_chunk = end - begin <= 32 * kAlignIdsPerLane;
  int xs[kAlignIdsPerLane];
  for (int base = begin; base < end; base += 32 * kAlignIdsPerLane) {
    align_load_chunk<IdT>(a, base, end, lane, xs);
#pragma unroll
    for (int j = 0; j < kAlignIdsPerLane; ++j) {
      if (xs[j] >= 0) atomicAdd(&hist[warp * e + xs[j]], 1);
    }
  }
  __syncthreads();
  for (int x = tid; x < e; x += threads) {
    int run = 0;
    for (int w = 0; w < warps; ++w) {
      const int c = hist[w * e + x];
      hist[w * e + x] = run;
      run += c;
    }
    start[x] = (run + bs - 1) / bs * bs;
  }
  __syncthreads();
  if (warp == 0) {  // exclusive scan of the padded sizes
    int carry = 0;
    for (int base = 0; base < e; base += 32) {
      const int x = base + lane;
      const int v = x < e ? start[x] : 0;
      int inclusive = v;
      for (int offset = 1; offset < 32; offset *= 2) {
        const int other = __shfl_up_sync(kFull, inclusive, offset);
        if (lane >= offset) inclusive += other;
      }
      if (x < e) start[x] = carry + inclusive - v;
      carry += __shfl_sync(kFull, inclusive, 31);
    }
    if (lane == 0) start[e] = carry;
  }
  __syncthreads();

  const int total = start[e];
  if (tid == 0) *a.num_tokens_post_padded = total;
  for (int i = tid; i < warps * e; i += threads) {
    hist[i] += start[i % e];  // now where the warp's next slot of the expert goes
    if (!place) a.warp_offsets[i] = hist[i];
  }
  for (int b = tid; b < int(a.num_blocks); b += threads) {
    const int pos = b * bs;
    int x = 0;
    if (pos < total) {  // the last expert whose segment starts at or before pos (empty ones precede it)
      int lo = 0, hi = e - 1;
      while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (start[mid] <= pos) {
          lo = mid;
        } else {
          hi = mid - 1;
        }
      }
      x = lo;
    }
    a.expert_ids[b] = a.expert_map != nullptr ? a.expert_map[x] : x;
  }
  for (int i = tid; i < int(a.max_padded); i += threads) a.sorted_token_ids[i] = numel;
  if (!place) return;
  __syncthreads();  // the sentinel fill lands before the slots overwrite it
  if (one_chunk) {
    if (begin < end) align_place_chunk(a, begin, lane, xs, hist + warp * e);
  } else {
    align_place_range<IdT>(a, begin, end, lane, hist + warp * e);
  }
}

// Block w (32 threads) places the slots of warp range w of moe_align_kernel (launched with as many
// blocks as that kernel had warps), from warp_offsets[w * e + x] for expert x.
template <typename IdT>
__global__ void moe_align_place_kernel(MoeAlignArgs a) {
  extern __shared__ __align__(16) int32_t next[];  // [e]
  const int e = int(a.num_experts), lane = int(threadIdx.x), warp = int(blockIdx.x);
  for (int x = lane; x < e; x += 32) next[x] = a.warp_offsets[warp * e + x];
  __syncwarp();
  int begin = 0, end = 0;
  align_range(int(a.numel), warp, int(gridDim.x), begin, end);
  align_place_range<IdT>(a, begin, end, lane, next);
}

}  // namespace fp8kit::ops::kernels
