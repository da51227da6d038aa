// CPU reference of fused_topk / grouped_topk (one TopkArgs, see routing_args.h for the formula)
// and of the EPLB replica mapping with load counting. The f32 steps go through routing_math.h in
// the order the CUDA kernel (routing_kernels.cuh) uses, so ids and weights match it bit for bit.
// Tested by tests/cpu/test_moe_routing.cpp and tests/gpu/test_moe_routing_cuda.cpp.
#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "core/check.h"
#include "core/parallel.h"
#include "ops/moe/routing_math.h"
#include "ops/moe/routing_ref.h"

namespace fp8kit::ops {

using namespace routing;

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Index of the first entry in the total order of ranks_before among those not yet taken.
int32_t argmax_untaken(const std::vector<float>& keys, const std::vector<uint8_t>& taken) {
  int32_t best = -1;
  for (int32_t j = 0; j < int32_t(keys.size()); ++j) {
    if (taken[size_t(j)]) continue;
    if (best < 0 || ranks_before(keys[size_t(j)], j, keys[size_t(best)], best)) best = j;
  }
  return best;
}

// softmax_f32 of one row, the sum in the lane order of routing_math.h.
void softmax_row(const std::vector<float>& x, DType score_dtype, std::vector<float>& scores) {
  float max_x = kNegInf;
  for (float v : x) max_x = std::fmax(max_x, v);
  std::array<float, kSumLanes> partial{};
  for (size_t j = 0; j < x.size(); ++j) {
    partial[j % kSumLanes] = add_rn(partial[j % kSumLanes], exp_f32(add_rn(x[j], -max_x)));
  }
  for (int offset = kSumLanes / 2; offset > 0; offset /= 2) {
    for (int lane = 0; lane < offset; ++lane) partial[size_t(lane)] = add_rn(partial[size_t(lane)], partial[size_t(lane + offset)]);
  }
  const float inv_sum = div_rn(1.0f, partial[0]);
  for (size_t j = 0; j < x.size(); ++j) scores[j] = round_to(score_dtype, mul_rn(exp_f32(add_rn(x[j], -max_x)), inv_sum));
}

struct RowScratch {
  std::vector<float> x, scores, keys, group_scores;
  std::vector<uint8_t> taken, group_taken;
};

void topk_row(const TopkArgs& a, int64_t row, RowScratch& s) {
  const int64_t e = a.num_experts;
  for (int64_t j = 0; j < e; ++j) s.x[size_t(j)] = load_float(a.gating, a.gating_dtype, row * a.gating_row_stride + j);
  if (a.scoring == ScoringFunc::kSoftmax) {
    softmax_row(s.x, a.score_dtype, s.scores);
  } else {
    for (int64_t j = 0; j < e; ++j) s.scores[size_t(j)] = round_to(a.score_dtype, sigmoid_f32(s.x[size_t(j)]));
  }
  for (int64_t j = 0; j < e; ++j) {
    float key = s.scores[size_t(j)];
    if (a.bias != nullptr) key = round_to(a.key_dtype, add_rn(key, load_float(a.bias, a.bias_dtype, j)));
    s.keys[size_t(j)] = selection_key(key);
  }

  if (a.num_expert_group > 1) {
    const int64_t group_size = e / a.num_expert_group;
    for (int64_t g = 0; g < a.num_expert_group; ++g) {
      float first = kNegInf, second = kNegInf;
      for (int64_t j = g * group_size; j < (g + 1) * group_size; ++j) {
        const float v = s.keys[size_t(j)];
        if (v > first) {
          second = first;
          first = v;
        } else if (v > second) {
          second = v;
        }
      }
      // With a bias: the sum of the group's two best (DeepSeek-V3, spec 3 #9); else its best.
      s.group_scores[size_t(g)] = a.bias != nullptr ? round_to(a.key_dtype, add_rn(first, second)) : first;
      s.group_taken[size_t(g)] = 0;
    }
    for (int64_t i = 0; i < a.topk_group; ++i) s.group_taken[size_t(argmax_untaken(s.group_scores, s.group_taken))] = 1;
    for (int64_t j = 0; j < e; ++j) {
      if (!s.group_taken[size_t(j / group_size)]) s.keys[size_t(j)] = kNegInf;
    }
  }

  std::fill(s.taken.begin(), s.taken.end(), uint8_t(0));
  float* weights = a.weights + row * a.topk;
  float sum = 0.0f;
  for (int64_t k = 0; k < a.topk; ++k) {
    const int32_t best = argmax_untaken(s.keys, s.taken);
    s.taken[size_t(best)] = 1;
    weights[k] = s.scores[size_t(best)];
    sum = add_rn(sum, weights[k]);
    store_index(a.ids, a.ids_dtype, row * a.topk + k, best);
  }
  if (a.renormalize) {
    sum = round_to(a.score_dtype, sum);
    for (int64_t k = 0; k < a.topk; ++k) weights[k] = round_to(a.score_dtype, div_rn(weights[k], sum));
  }
}

}  // namespace

void topk_ref(const TopkArgs& args) {
  parallel_for(args.m, 64, [&](int64_t begin, int64_t end) {
    RowScratch s;
    const size_t e = size_t(args.num_experts), g = size_t(args.num_expert_group);
    s.x.resize(e);
    s.scores.resize(e);
    s.keys.resize(e);
    s.taken.resize(e);
    s.group_scores.resize(g);
    s.group_taken.resize(g);
    for (int64_t row = begin; row < end; ++row) topk_row(args, row, s);
  });
}

void eplb_ref(const EplbArgs& a) {
  for (int64_t slot = 0; slot < a.numel; ++slot) {
    const int64_t id = load_index(a.ids_in, a.ids_in_dtype, slot);
    FP8KIT_CHECK_ARG(id >= 0 && id < a.num_logical,
                     "select_experts: routed expert id {} at slot {} is outside [0, {}) (`logical_to_physical_map` rows)",
                     id, slot, a.num_logical);
    const int64_t count = load_index(a.replica_count, a.replica_count_dtype, id);
    FP8KIT_CHECK_ARG(count >= 1 && count <= a.max_replicas,
                     "select_experts: `logical_replica_count`[{}] = {} is outside [1, {}]", id, count, a.max_replicas);
    const int64_t replica = eplb_replica(slot, count);  // the spec draws at random; docs/compat.md
    const int64_t physical = load_index(a.logical_to_physical, a.logical_to_physical_dtype, id * a.max_replicas + replica);
    store_index(a.ids_out, a.ids_out_dtype, slot, physical);
    int64_t local = physical;
    if (a.expert_map != nullptr) {
      FP8KIT_CHECK_ARG(physical >= 0 && physical < a.num_physical,
                       "select_experts: physical expert id {} is outside [0, {}) (`expert_map` length)", physical,
                       a.num_physical);
      local = a.expert_map[physical];
    }
    if (local < 0) continue;  // another rank's expert: masked, counted nowhere
    FP8KIT_CHECK_ARG(local < a.load_size, "select_experts: expert {} is outside `expert_load_view` of {} entries", local,
                     a.load_size);
    a.expert_load[local] += 1;
  }
}

}  // namespace fp8kit::ops
