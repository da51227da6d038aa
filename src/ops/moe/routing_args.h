// Argument blocks of the MoE routing ops: raw pointers, sizes, dtypes, validated by
// moe_routing.cpp and moe_align.cpp. The CPU reference (routing_ref.h) and the CUDA launchers
// (routing_cuda.h) take the very same structs, so one value drives both in the GPU tests
// (tests/gpu/test_moe_routing_cuda.cpp). Pointers live on the op's device.
#pragma once

#include <cstdint>

#include "fp8kit/dtype.h"

namespace fp8kit::ops {

enum class ScoringFunc : uint8_t { kSoftmax, kSigmoid };

// fused_topk and grouped_topk (spec 1.9), one row of gating logits per token:
//   scores = round_to(score_dtype, softmax_f32(x) | sigmoid_f32(x))
//   keys   = bias ? round_to(key_dtype, scores + bias) : scores
//   group score = bias ? round_to(key_dtype, top1 + top2 of the group's keys) : max of its keys
//   the topk_group best groups stay, the other experts' keys become -inf
//   ids = top-k of keys (repeated argmax, ties to the lower index), weights = scores[ids]
//   renormalize: s = round_to(score_dtype, sum_f32 weights in k order);
//                weights = round_to(score_dtype, weights / s)
// fused_topk is the case score_dtype = f32, one group, no bias.
struct TopkArgs {
  const void* gating = nullptr;  // [m, num_experts] of gating_dtype, last dimension contiguous
  DType gating_dtype = DType::kF32;
  int64_t gating_row_stride = 0;
  int64_t m = 0, num_experts = 0, topk = 0;
  ScoringFunc scoring = ScoringFunc::kSoftmax;
  DType score_dtype = DType::kF32;  // f32 (fused_topk) or gating_dtype (grouped_topk)
  int64_t num_expert_group = 1;     // divides num_experts
  int64_t topk_group = 1;           // <= num_expert_group; topk <= topk_group * group size
  const void* bias = nullptr;       // [num_experts] of bias_dtype, contiguous; null: none
  DType bias_dtype = DType::kF32;
  DType key_dtype = DType::kF32;  // torch's promotion of (score_dtype, bias_dtype)
  bool renormalize = false;
  float* weights = nullptr;  // [m, topk] f32, contiguous
  void* ids = nullptr;       // [m, topk] i32 | i64, contiguous
  DType ids_dtype = DType::kI32;
};

// EPLB in select_experts (spec 1.9), for every routed slot s = m * topk + k:
//   replica = eplb_replica(s, logical_replica_count[id])  (routing_math.h: a fixed hash of s where
//             the spec draws at random; docs/compat.md)
//   ids_out[s] = logical_to_physical[id, replica]
//   local = expert_map ? expert_map[ids_out[s]] : ids_out[s]; if local >= 0: expert_load[local] += 1
// ids_out may equal ids_in. The CUDA kernel skips slots whose ids are out of range (the reference
// rejects them): a kernel cannot report bad data without a host sync.
struct EplbArgs {
  const void* ids_in = nullptr;  // [numel] i32 | i64 logical ids
  DType ids_in_dtype = DType::kI32;
  int64_t numel = 0;
  void* ids_out = nullptr;  // [numel] physical ids
  DType ids_out_dtype = DType::kI32;
  const void* logical_to_physical = nullptr;  // [num_logical, max_replicas] i32 | i64, contiguous
  DType logical_to_physical_dtype = DType::kI64;
  int64_t num_logical = 0, max_replicas = 0;
  const void* replica_count = nullptr;  // [num_logical] i32 | i64, contiguous
  DType replica_count_dtype = DType::kI64;
  const int32_t* expert_map = nullptr;  // [num_physical] or null
  int64_t num_physical = 0;             // expert_map's length (0 without a map)
  int64_t* expert_load = nullptr;       // [load_size]
  int64_t load_size = 0;
};

// moe_align_block_size (spec 1.10, 2.5). Within an expert the slots keep ascending flat-index
// order (the spec leaves it unspecified; fixing it makes CPU and CUDA outputs identical).
struct MoeAlignArgs {
  const void* topk_ids = nullptr;  // [numel] i32 | i64, contiguous (flat index m * topk + k)
  DType ids_dtype = DType::kI32;
  int64_t numel = 0;
  int64_t num_experts = 0;  // global count; ids lie in [0, num_experts)
  int64_t block_size = 0;
  const int32_t* expert_map = nullptr;  // [num_experts] or null
  int32_t* sorted_token_ids = nullptr;  // [max_padded]
  int64_t max_padded = 0;
  int32_t* expert_ids = nullptr;  // [num_blocks] = ceil(max_padded / block_size)
  int64_t num_blocks = 0;
  int32_t* num_tokens_post_padded = nullptr;  // [1]
  // CUDA scratch [kMoeAlignMaxWarps * num_experts] (moe_align_cuda.cu); the CPU reference ignores it.
  int32_t* warp_offsets = nullptr;
};

inline constexpr int64_t kMoeAlignMaxWarps = 32;

}  // namespace fp8kit::ops
