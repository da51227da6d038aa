// Mixture-of-experts routing (spec 1.9, 1.10, 2.5, 2.7): which experts each token goes to and
// with which weight, the expert-parallel maps, and the grouping of routed tokens by expert that
// the grouped GEMMs consume. Routes by device: the CPU reference (src/ops/moe/, the executable
// spec) or CUDA kernels whose top-k ids are identical to it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "fp8kit/runtime/forward_context.h"
#include "fp8kit/tensor.h"

namespace fp8kit::ops {

// topk_weights: f32 [M, topk]; topk_ids: i32 [M, topk] (or the requested indices dtype).
struct TopkResult {
  Tensor weights;
  Tensor ids;
};

// Softmax over the experts in f32, then top-k by repeated argmax (ties to the lower expert
// index), optionally renormalized to sum to 1 (spec 1.9 fused_topk). Ids come out in descending
// weight order. CPU and CUDA share the f32 steps (src/ops/moe/routing_math.h), so their weights
// are bit-identical.
// hidden_states: [M, H] (only its row count is used); gating_output: [M, E] f32, f16 or bf16.
TopkResult fused_topk(const ForwardContext& ctx, const Tensor& hidden_states, const Tensor& gating_output, int64_t topk,
                      bool renormalize, std::optional<DType> indices_type = std::nullopt);

// DeepSeek-style grouped top-k (spec 1.9 grouped_topk): experts in num_expert_group groups,
// only the topk_group best groups are eligible. scoring_func "softmax" or "sigmoid";
// e_score_correction_bias [E] (optional, f32/f16/bf16) is added for the selection only, and then
// a group scores the sum of its two best biased scores (else its best score). Scores are rounded
// to the dtype of gating_output after each step, as eager torch does (exact steps:
// src/ops/moe/routing_args.h). Requires E % num_expert_group == 0, topk_group <= num_expert_group
// and topk <= topk_group * E / num_expert_group. Returns f32 weights and i32 ids.
struct GroupedTopkOptions {
  int64_t num_expert_group = 0;
  int64_t topk_group = 0;
  std::string scoring_func = "softmax";
  Tensor e_score_correction_bias;
};
TopkResult grouped_topk(const ForwardContext& ctx, const Tensor& hidden_states, const Tensor& gating_output, int64_t topk,
                        bool renormalize, const GroupedTopkOptions& options);

// FusedMoE.select_experts (spec 1.9): grouped or plain top-k, or a custom routing function (whose
// ids keep their dtype unless EPLB rewrites them); then expert-parallel load balancing when
// enabled. EPLB picks the replica of slot m * topk + k with a fixed hash instead of the spec's
// random draw (docs/compat.md), and adds 1 to expert_load_view[expert_map[physical]] (or
// [physical] without a map) for every slot routed to this rank.
using CustomRoutingFunction = std::function<TopkResult(const Tensor& hidden_states, const Tensor& gating_output,
                                                       int64_t topk, bool renormalize)>;
struct SelectExpertsOptions {
  int64_t top_k = 1;
  bool renormalize = false;
  bool use_grouped_topk = false;
  std::optional<int64_t> topk_group;
  std::optional<int64_t> num_expert_group;
  CustomRoutingFunction custom_routing_function;
  std::string scoring_func = "softmax";
  Tensor e_score_correction_bias;
  std::optional<DType> indices_type;
  // Expert-parallel load balancing (EPLB): logical -> physical expert replicas.
  bool enable_eplb = false;
  Tensor expert_map;               // i32 [E_global]: local index or -1
  Tensor expert_load_view;         // i64 [local or physical experts]: routed-token counts are added here
  Tensor logical_to_physical_map;  // i64/i32 [E_logical, max_replicas]
  Tensor logical_replica_count;    // i64/i32 [E_logical]
};
TopkResult select_experts(const ForwardContext& ctx, const Tensor& hidden_states, const Tensor& router_logits, const SelectExpertsOptions& options);

// determine_expert_map (spec 1.9): (local expert count, i32 [E_global] map of global -> local
// expert, -1 where another rank owns it; undefined when ep_size == 1).
std::pair<int64_t, Tensor> determine_expert_map(int64_t ep_size, int64_t ep_rank, int64_t global_num_experts);

// moe_align_block_size (spec 1.10, 2.5): the routed (token, k) slots grouped by expert, each
// expert's segment padded to a multiple of block_size. sorted_token_ids [max_padded] i32 hold
// flat indices m * topk + k, padded with the sentinel M * topk; expert_ids [ceil(max_padded /
// block_size)] i32 give each block's expert (mapped through expert_map: -1 for experts of other
// ranks; blocks past the padded total hold expert 0, mapped); num_tokens_post_padded [1] i32.
// num_experts is the global count. Inside a segment the slots are in ascending order.
struct MoeAlignResult {
  Tensor sorted_token_ids;
  Tensor expert_ids;
  Tensor num_tokens_post_padded;
};
MoeAlignResult moe_align_block_size(const ForwardContext& ctx, const Tensor& topk_ids, int64_t block_size,
                                    int64_t num_experts, const Tensor& expert_map = {}, bool pad_sorted_ids = false);

}  // namespace fp8kit::ops
