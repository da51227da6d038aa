// __global__ kernel of moe_align_block_size (reference: moe_align_ref.cpp, same MoeAlignArgs).
// One block does it all in one launch: each warp owns a contiguous range of the flat slots and
// counts its experts into its own shared-memory histogram; the histograms become per-warp write
// offsets and the padded segment starts (a scan over experts); then every warp places its slots,
// 32 at a time, ranking equal experts inside the warp with __match_any_sync. Ranges ascend with
// the warp index and ranks with the lane, so each segment lists its slots in ascending order, the
// reference's order. Floor: numel * 4-8 bytes read twice plus max_padded * 4 written (< 1 MB at
// M = 8192, topk = 8), i.e. latency-bound at a few microseconds.
// Tests: tests/gpu/test_moe_routing_cuda.cpp.
#pragma once

#include <cstdint>

#include "ops/moe/routing_args.h"
#include "ops/moe/routing_math.h"

namespace fp8kit::ops::kernels {

// Shared memory: hist[warps][E] then start[E + 1], all i32.
__host__ __device__ inline int64_t moe_align_shared_bytes(int64_t warps, int64_t e) { return (warps * e + e + 1) * 4; }

__global__ void moe_align_kernel(MoeAlignArgs a) {
  extern __shared__ __align__(16) int32_t shared_i32[];
  constexpr unsigned kFull = 0xffffffffu;
  const int e = int(a.num_experts), bs = int(a.block_size), numel = int(a.numel);
  const int tid = int(threadIdx.x), threads = int(blockDim.x);
  const int lane = tid % 32, warp = tid / 32, warps = threads / 32;
  int32_t* hist = shared_i32;           // [warps][e]: counts, then this warp's next offset in the segment
  int32_t* start = shared_i32 + warps * e;  // [e + 1]: padded segment starts, start[e] = total

  for (int i = tid; i < warps * e; i += threads) hist[i] = 0;
  __syncthreads();
  const int per_warp = ((numel + warps - 1) / warps + 31) / 32 * 32;
  const int begin = min(numel, warp * per_warp), end = min(numel, begin + per_warp);
  auto expert_at = [&](int i) -> int {
    const int64_t id = routing::load_index(a.topk_ids, a.ids_dtype, i);
    return id >= 0 && id < e ? int(id) : -1;  // bad ids are skipped (the reference rejects them)
  };
  for (int i = begin + lane; i < end; i += 32) {
    const int x = expert_at(i);
    if (x >= 0) atomicAdd(&hist[warp * e + x], 1);
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
  __syncthreads();  // the sentinel fill lands before the slots overwrite it

  for (int base = begin; base < end; base += 32) {
    const int i = base + lane;
    const int x = i < end ? expert_at(i) : -1;
    const unsigned peers = __match_any_sync(kFull, x);
    if (x >= 0) {
      const unsigned lower = peers & ((1u << lane) - 1u);
      a.sorted_token_ids[start[x] + hist[warp * e + x] + __popc(lower)] = i;
    }
    __syncwarp();
    if (x >= 0 && lane == __ffs(peers) - 1) hist[warp * e + x] += __popc(peers);
    __syncwarp();
  }
}

}  // namespace fp8kit::ops::kernels
