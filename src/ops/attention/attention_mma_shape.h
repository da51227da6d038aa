// The shared memory of the tensor-core attention kernel (attention_mma.cuh) as a function of the
// head size and the shape, for the kernel's launch and for the plan (attention_plan.cpp), which
// must not pick a shape the device cannot hold (sm_89 has 99 KiB a block).
#pragma once

#include <cstddef>
#include <cstdint>

namespace fp8kit::ops {

inline constexpr int kAttentionMmaTileKeys = 64;

constexpr int attention_mma_stages(int64_t head_size) { return head_size >= 256 ? 1 : 2; }

// Q [16 * warps_m][D + 8] and stages x (K, V) [64][D + 8] of 16-bit values, the stages' key flags,
// and (warps_m 1) the merge buffer of 4 warps' states, which reuses the tiles.
constexpr size_t attention_mma_shared_bytes(int64_t head_size, int warps_m) {
  const size_t row = size_t(head_size + 8) * 2;
  const size_t q = size_t(16 * warps_m) * row;
  const size_t tiles = size_t(attention_mma_stages(head_size)) * 2 * kAttentionMmaTileKeys * row;
  const size_t flags = size_t(attention_mma_stages(head_size)) * kAttentionMmaTileKeys * 4;
  const size_t merge = warps_m == 1 ? size_t(4) * 16 * size_t(head_size + 2) * 4 : 0;
  return q + flags + (tiles > merge ? tiles : merge);
}

}  // namespace fp8kit::ops
