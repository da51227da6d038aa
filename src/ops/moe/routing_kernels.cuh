// __global__ kernels of fused_topk / grouped_topk and of the EPLB replica mapping. Reference:
// routing_ref.cpp on the same args (routing_args.h); both go through routing_math.h, so ids are
// identical and weights bit-identical. One warp per token row: the row's scores and keys sit in
// shared memory, the softmax sum is the lane-strided partial sums plus a butterfly, and each
// top-k step is a warp argmax under the order of routing::ranks_before.
// Floor: M * E * (bytes of a logit) read once; at M = 8192, E = 256 that is ~1-2 us of HBM time,
// so the kernel is bound by its k serial warp reductions (~k * 5 shuffles per row).
// Tests: tests/gpu/test_moe_routing_cuda.cpp.
#pragma once

#include <climits>
#include <cstdint>

#include "ops/moe/routing_args.h"
#include "ops/moe/routing_math.h"

namespace fp8kit::ops::kernels {

inline constexpr int kWarpSize = 32;
inline constexpr unsigned kFullMask = 0xffffffffu;

__host__ __device__ inline int64_t align16(int64_t bytes) { return (bytes + 15) / 16 * 16; }

// Shared memory of one warp: scores[E], keys[E] (f32), group_scores[G] (f32), taken[E],
// group_taken[G] (bytes).
__host__ __device__ inline int64_t topk_warp_scratch_bytes(int64_t e, int64_t g) {
  return 2 * align16(e * 4) + align16(g * 4) + align16(e) + align16(g);
}

// The untaken index first in the order of ranks_before, the same on every lane.
__device__ inline int warp_argmax(const float* keys, const uint8_t* taken, int n, int lane) {
  float best_key = -bits_to_float(0x7f800000u);
  int best = INT_MAX;
  for (int j = lane; j < n; j += kWarpSize) {
    if (!taken[j] && routing::ranks_before(keys[j], j, best_key, best)) {
      best_key = keys[j];
      best = j;
    }
  }
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const float other_key = __shfl_xor_sync(kFullMask, best_key, offset);
    const int other = __shfl_xor_sync(kFullMask, best, offset);
    if (routing::ranks_before(other_key, other, best_key, best)) {
      best_key = other_key;
      best = other;
    }
  }
  return best;
}

__device__ inline float warp_max(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

// The butterfly of routing::kSumLanes: every lane ends with the reference's partial[0].
__device__ inline float warp_sum(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) v = routing::add_rn(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

__global__ void topk_kernel(TopkArgs a) {
  using namespace routing;
  extern __shared__ __align__(16) unsigned char smem[];
  const int lane = int(threadIdx.x) % kWarpSize;
  const int warp = int(threadIdx.x) / kWarpSize;
  const int warps = int(blockDim.x) / kWarpSize;
  const int e = int(a.num_experts), g = int(a.num_expert_group);
  unsigned char* base = smem + warp * topk_warp_scratch_bytes(e, g);
  float* scores = reinterpret_cast<float*>(base);
  float* keys = reinterpret_cast<float*>(base + align16(e * 4));
  float* group_scores = reinterpret_cast<float*>(base + 2 * align16(e * 4));
  uint8_t* taken = base + 2 * align16(e * 4) + align16(g * 4);
  uint8_t* group_taken = taken + align16(e);
  const float neg_inf = -bits_to_float(0x7f800000u);

  for (int64_t row = int64_t(blockIdx.x) * warps + warp; row < a.m; row += int64_t(gridDim.x) * warps) {
    const int64_t in = row * a.gating_row_stride;
    for (int j = lane; j < e; j += kWarpSize) scores[j] = load_float(a.gating, a.gating_dtype, in + j);
    if (a.scoring == ScoringFunc::kSoftmax) {
      float max_x = neg_inf;
      for (int j = lane; j < e; j += kWarpSize) max_x = fmaxf(max_x, scores[j]);
      max_x = warp_max(max_x);
      float partial = 0.0f;
      for (int j = lane; j < e; j += kWarpSize) partial = add_rn(partial, exp_f32(add_rn(scores[j], -max_x)));
      const float inv_sum = div_rn(1.0f, warp_sum(partial));
      for (int j = lane; j < e; j += kWarpSize) {
        scores[j] = round_to(a.score_dtype, mul_rn(exp_f32(add_rn(scores[j], -max_x)), inv_sum));
      }
    } else {
      for (int j = lane; j < e; j += kWarpSize) scores[j] = round_to(a.score_dtype, sigmoid_f32(scores[j]));
    }
    for (int j = lane; j < e; j += kWarpSize) {
      float key = scores[j];
      if (a.bias != nullptr) key = round_to(a.key_dtype, add_rn(key, load_float(a.bias, a.bias_dtype, j)));
      keys[j] = selection_key(key);
      taken[j] = 0;
    }
    __syncwarp();

    if (g > 1) {
      const int group_size = e / g;
      for (int grp = lane; grp < g; grp += kWarpSize) {
        float first = neg_inf, second = neg_inf;
        for (int j = grp * group_size; j < (grp + 1) * group_size; ++j) {
          const float v = keys[j];
          if (v > first) {
            second = first;
            first = v;
          } else if (v > second) {
            second = v;
          }
        }
        group_scores[grp] = a.bias != nullptr ? round_to(a.key_dtype, add_rn(first, second)) : first;
        group_taken[grp] = 0;
      }
      __syncwarp();
      for (int64_t i = 0; i < a.topk_group; ++i) {
        const int best = warp_argmax(group_scores, group_taken, g, lane);
        if (lane == 0) group_taken[best] = 1;
        __syncwarp();
      }
      for (int j = lane; j < e; j += kWarpSize) {
        if (!group_taken[j / group_size]) keys[j] = neg_inf;
      }
      __syncwarp();
    }

    float* weights = a.weights + row * a.topk;
    float sum = 0.0f;
    for (int64_t k = 0; k < a.topk; ++k) {
      const int best = warp_argmax(keys, taken, e, lane);
      if (lane == 0) {
        taken[best] = 1;
        weights[k] = scores[best];
        sum = add_rn(sum, scores[best]);
        store_index(a.ids, a.ids_dtype, row * a.topk + k, best);
      }
      __syncwarp();
    }
    if (a.renormalize && lane == 0) {
      sum = round_to(a.score_dtype, sum);
      for (int64_t k = 0; k < a.topk; ++k) weights[k] = round_to(a.score_dtype, div_rn(weights[k], sum));
    }
    __syncwarp();
  }
}

__global__ void eplb_kernel(EplbArgs a) {
  using namespace routing;
  for (int64_t slot = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; slot < a.numel;
       slot += int64_t(gridDim.x) * blockDim.x) {
    const int64_t id = load_index(a.ids_in, a.ids_in_dtype, slot);
    if (id < 0 || id >= a.num_logical) {
      store_index(a.ids_out, a.ids_out_dtype, slot, id);  // bad data, kept as is (the reference rejects it)
      continue;
    }
    const int64_t count = load_index(a.replica_count, a.replica_count_dtype, id);
    const int64_t replica = count >= 1 && count <= a.max_replicas ? eplb_replica(slot, count) : 0;
    const int64_t physical = load_index(a.logical_to_physical, a.logical_to_physical_dtype, id * a.max_replicas + replica);
    store_index(a.ids_out, a.ids_out_dtype, slot, physical);
    int64_t local = physical;
    if (a.expert_map != nullptr) local = physical >= 0 && physical < a.num_physical ? a.expert_map[physical] : -1;
    if (local >= 0 && local < a.load_size) {
      atomicAdd(reinterpret_cast<unsigned long long*>(a.expert_load + local), 1ull);
    }
  }
}

}  // namespace fp8kit::ops::kernels
