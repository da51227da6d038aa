// The tensor-core W8A16 kernels behind weight_only_mm_cuda: the weight-streaming one for few rows
// (weight_only_mma.cu) and the tiled one for many (weight_only_tiled.cu).
#pragma once

#include <cuda_runtime_api.h>

#include "ops/gemm/gemm_args.h"

namespace fp8kit::ops {

inline constexpr int64_t kWeightOnlyMmaMaxM = 64;

// Both: sm_80+, K a multiple of 16, 16-byte aligned weight and activation rows.
// Streaming: 1 <= M <= 64, block scales with block_k a multiple of 64.
bool weight_only_mma_serves(const WeightOnlyMmArgs& args, int device);
void weight_only_mma_cuda(const WeightOnlyMmArgs& args, cudaStream_t stream);
// Tiled: any M, block scales with block_k a multiple of 32 and block_n of 32.
bool weight_only_tiled_serves(const WeightOnlyMmArgs& args, int device);
void weight_only_tiled_cuda(const WeightOnlyMmArgs& args, cudaStream_t stream);

// The tiled kernel on the fused MoE's sorted rows (its grouped GEMMs with FP8 expert weights and
// 16-bit activations): args.m sorted positions in blocks of 128 rows (kWeightOnlyTileM), each block
// one expert's; position p holds slot sorted_ids[p] (padding: >= num_slots), whose activation row is
// slot / a_slots_per_row of args.x and whose output row is slot of args.out. args.w and
// args.scale are expert 0's; expert e's are w_expert_stride and scale_expert_stride elements on.
// Epilogue: fl32(scaled sum) times the slot's routed weight when slot_weight is set; an expert
// of -1 (another rank's) writes zeros.
struct W8A16SortedRows {
  const int32_t* sorted_ids = nullptr;
  const int32_t* expert_ids = nullptr;    // [positions / kWeightOnlyTileM]
  const int32_t* num_post_pad = nullptr;  // [1] positions in use
  int64_t num_slots = 0, a_slots_per_row = 1;
  int64_t w_expert_stride = 0, scale_expert_stride = 0;
  const float* slot_weight = nullptr;
};
void weight_only_tiled_sorted_cuda(const WeightOnlyMmArgs& args, const W8A16SortedRows& rows, cudaStream_t stream);

// The streaming kernel on sorted rows (the MoE's decode, few slots an expert): moe_align blocks of
// kWeightOnlyMmaSortedBlock positions, otherwise as the tiled kernel's sorted mode (args.m a
// multiple of the block). Block scales with block_k a multiple of 64.
inline constexpr int64_t kWeightOnlyMmaSortedBlock = 16;
bool weight_only_mma_sorted_serves(const WeightOnlyMmArgs& args, int device);
void weight_only_mma_sorted_cuda(const WeightOnlyMmArgs& args, const W8A16SortedRows& rows, cudaStream_t stream);

}  // namespace fp8kit::ops
