// The shared memory of the tensor-core attention kernels (attention_mma.cuh, attention_mma_decode.cuh) as a function of the
// head size and the shape, for the kernel's launch and for the plan (attention_plan.cpp), which
// must not pick a shape the device cannot hold (sm_89 has 99 KiB a block).
#pragma once

#include <cstddef>
#include <cstdint>

namespace fp8kit::ops {

inline constexpr int kAttentionMmaTileKeys = 64;

// The decode kernel (attention_mma_decode.cuh) serves 8- and 16-row items up to this head size.
inline constexpr int64_t kAttentionMmaDecodeMaxHeadSize = 128;
inline constexpr int kAttentionMmaDecodeWarps = 4;
inline constexpr int kAttentionMmaDecodeTableSlots = 512;
// An FP8 cache's tiles in the decode kernel go through shared memory (cp.async) in 2 to 4 stages a
// warp, as the device's shared memory allows (the plan picks); a 16-bit cache's are held in
// registers, two a warp.
inline constexpr int kAttentionMmaDecodeMinStages = 2;
inline constexpr int kAttentionMmaDecodeMaxStages = 4;
// CTAs of the decode kernel an SM can hold by its launch bounds: 3 with an FP8 cache (at most 170
// registers a thread), 2 with a 16-bit one (whose two register sets of tiles need more); the tile
// kernel's, 2 (its shared memory holds no more at head size 128).
inline constexpr int kAttentionMmaDecodeFp8CtasPerSm = 3;
inline constexpr int kAttentionMmaCtasPerSm = 2;
// Items of at most this many rows (a decode step's group heads of one KV head, G <= 8) run the
// decode kernel with the operands swapped (S^T = K Q^T, O^T = V^T P^T: the rows as the mma's n),
// whose FP8 instances take at most 128 registers a thread: 4 CTAs an SM where the shared memory
// holds them.
inline constexpr int kAttentionMmaDecodeN8Rows = 8;
inline constexpr int kAttentionMmaDecodeN8Fp8CtasPerSm = 4;

// One warp's tile of the decode kernel: 16 keys, K and V.
constexpr size_t attention_mma_decode_stage_bytes(int64_t head_size, int element_bytes) {
  return size_t(16) * size_t(head_size) * size_t(element_bytes) * 2;
}

// The decode kernel's merge buffer: a row holds a lane's 8 shares of D / 8 values at a stride of
// D / 8 + 4 floats, and the row stride is 1 modulo 32 banks, so the 32 lanes' stores of one value
// each land in 32 different banks.
constexpr int64_t attention_mma_decode_merge_share(int64_t head_size) { return head_size / 8 + 4; }
constexpr int64_t attention_mma_decode_merge_row(int64_t head_size) {
  return 8 * attention_mma_decode_merge_share(head_size) + 1;
}

// The decode kernel's shared memory: q [16][D + 8] 16-bit, the block-table chunk, the rows' q
// exponents, then (FP8 cache) the 4 warps' stages, each lane's word of which keys of a stage are
// readable, and, over them after the key loop, the 4 warps' merge states.
constexpr size_t attention_mma_decode_shared_bytes(int64_t head_size, bool fp8, int stages) {
  const size_t staged = fp8 ? size_t(kAttentionMmaDecodeWarps) * size_t(stages) *
                                  (attention_mma_decode_stage_bytes(head_size, 1) + 32 * 4)
                            : 0;
  const size_t merge = size_t(kAttentionMmaDecodeWarps) * 16 * size_t(attention_mma_decode_merge_row(head_size)) * 4 +
                       size_t(kAttentionMmaDecodeWarps) * 16 * 2 * 4;
  return size_t(16) * size_t(head_size + 8) * 2 + size_t(kAttentionMmaDecodeTableSlots) * 4 + 16 * 4 +
         (staged > merge ? staged : merge);
}

constexpr int attention_mma_stages(int64_t head_size) { return head_size >= 256 ? 1 : 2; }

// The tile kernel (attention_mma.cuh): Q [16 * warps_m][D + 8] and stages x (K, V) [64][D + 8] of
// 16-bit values, the stages' key flags and the rows' q exponents, and (warps_m 1) the merge buffer of 4 warps' states, which
// reuses the tiles.
constexpr size_t attention_mma_tile_shared_bytes(int64_t head_size, int warps_m) {
  const size_t row = size_t(head_size + 8) * 2;
  const size_t q = size_t(16 * warps_m) * row;
  const size_t tiles = size_t(attention_mma_stages(head_size)) * 2 * kAttentionMmaTileKeys * row;
  const size_t flags = size_t(attention_mma_stages(head_size)) * kAttentionMmaTileKeys * 4 + size_t(16 * warps_m) * 4;
  const size_t merge = warps_m == 1 ? size_t(4) * 16 * size_t(head_size + 2) * 4 : 0;
  return q + flags + (tiles > merge ? tiles : merge);
}

// The least a launch of the tensor-core kernels needs (attention_mma_instances.cuh): 8- and 16-row items
// up to kAttentionMmaDecodeMaxHeadSize run the decode kernel (an FP8 cache in its fewest
// stages: the most of the two cache kinds), the others the tile kernel.
constexpr size_t attention_mma_shared_bytes(int64_t head_size, int warps_m) {
  return warps_m == 1 && head_size <= kAttentionMmaDecodeMaxHeadSize
             ? attention_mma_decode_shared_bytes(head_size, true, kAttentionMmaDecodeMinStages)
             : attention_mma_tile_shared_bytes(head_size, warps_m);
}

}  // namespace fp8kit::ops
