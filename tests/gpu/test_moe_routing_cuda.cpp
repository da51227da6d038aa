// MoE routing on CUDA (src/ops/moe/routing_cuda.cu, moe_align_cuda.cu) against the CPU reference
// through the public ops: fused_topk and grouped_topk ids identical and weights bit-identical,
// moe_align_block_size outputs identical (with and without expert_map), EPLB ids and loads
// identical; E in {8, 64, 128, 256}, topk in {1, 2, 8}, M from 1 to 8192, f32/bf16/f16 logits,
// random and tie-heavy. Outputs come from poisoned allocations.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "fp8kit/ops/moe_routing.h"
#include "fp8kit/platform.h"
#include "gpu_test_util.h"

namespace fp8kit {
namespace {

using namespace gpu_test;

const Device kCuda = Device::cuda(0);

enum class Pattern { kRandom, kTies };

// Logits of one pattern: normal values, or values from {0, 1, 2} (ties everywhere, also after
// rounding to bf16/f16, which keeps the small integers exact).
Tensor make_logits(int64_t m, int64_t e, DType dtype, Pattern pattern, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::uniform_int_distribution<int> small(0, 2);
  Tensor t = Tensor::empty({m, e}, dtype);
  for (int64_t i = 0; i < m * e; ++i) store_float(t, i, pattern == Pattern::kRandom ? normal(rng) : float(small(rng)));
  return t;
}

void expect_same_result(const Case& c, const ops::TopkResult& got, const ops::TopkResult& want) {
  expect_same_tensor(c, "ids", got.ids, want.ids);
  expect_same_tensor(c, "weights", got.weights, want.weights);
}

void poison_topk_outputs(int64_t m, int64_t topk) {
  poison_next_allocations({size_t(m * topk * 4), size_t(m * topk * 8)});
}

TEST(MoeRoutingCuda, FusedTopkMatchesReference) {
  for (int64_t e : {8, 64, 128, 256}) {
    for (int64_t topk : {1, 2, 8}) {
      for (int64_t m : {1, 3, 129, 8192}) {
        for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
          for (Pattern pattern : {Pattern::kRandom, Pattern::kTies}) {
            const bool renormalize = m != 3;
            const uint32_t seed = next_seed();
            const Case c{"fused_topk", {m, e}, dtype, DType::kF32, seed,
                         "topk " + std::to_string(topk) + (pattern == Pattern::kTies ? " ties" : " random") +
                             (renormalize ? " renormalize" : "")};
            const Tensor logits = make_logits(m, e, dtype, pattern, seed);
            const Tensor hidden = Tensor::zeros({m, 1}, DType::kF32);
            const DType ids_dtype = (m & 1) ? DType::kI32 : DType::kI64;
            const auto want = ops::fused_topk(ctx_of(hidden), hidden, logits, topk, renormalize, ids_dtype);
            poison_topk_outputs(m, topk);
            const auto got = ops::fused_topk(ctx_of(hidden.to(kCuda)), hidden.to(kCuda), logits.to(kCuda), topk, renormalize, ids_dtype);
            expect_same_result(c, got, want);
            if (::testing::Test::HasFailure()) return;
          }
        }
      }
    }
  }
}

TEST(MoeRoutingCuda, GroupedTopkMatchesReference) {
  struct Shape3 {
    int64_t e, groups, topk_group;
  };
  for (const Shape3 s : {Shape3{8, 4, 2}, Shape3{64, 8, 4}, Shape3{128, 8, 3}, Shape3{256, 8, 4}}) {
    for (int64_t topk : {1, 2, 8}) {
      if (topk > s.topk_group * (s.e / s.groups)) continue;
      for (int64_t m : {1, 5, 1000, 8192}) {
        for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
          for (const char* scoring : {"softmax", "sigmoid"}) {
            for (int bias_kind = 0; bias_kind < 3; ++bias_kind) {  // none, f32, the logits' dtype
              for (Pattern pattern : {Pattern::kRandom, Pattern::kTies}) {
                const uint32_t seed = next_seed();
                ops::GroupedTopkOptions o;
                o.num_expert_group = s.groups;
                o.topk_group = s.topk_group;
                o.scoring_func = scoring;
                if (bias_kind > 0) {
                  o.e_score_correction_bias = random_tensor({s.e}, bias_kind == 1 ? DType::kF32 : dtype, seed + 1, 0.1f);
                }
                const Case c{"grouped_topk", {m, s.e}, dtype, DType::kF32, seed,
                             std::string(scoring) + " topk " + std::to_string(topk) + " groups " +
                                 std::to_string(s.topk_group) + "/" + std::to_string(s.groups) + " bias " +
                                 std::to_string(bias_kind) + (pattern == Pattern::kTies ? " ties" : " random")};
                const Tensor logits = make_logits(m, s.e, dtype, pattern, seed);
                const Tensor hidden = Tensor::zeros({m, 1}, DType::kF32);
                const bool renormalize = (seed & 1) != 0;
                const auto want = ops::grouped_topk(ctx_of(hidden), hidden, logits, topk, renormalize, o);
                ops::GroupedTopkOptions od = o;
                if (bias_kind > 0) od.e_score_correction_bias = o.e_score_correction_bias.to(kCuda);
                poison_topk_outputs(m, topk);
                const auto got = ops::grouped_topk(ctx_of(hidden.to(kCuda)), hidden.to(kCuda), logits.to(kCuda), topk, renormalize, od);
                expect_same_result(c, got, want);
                if (::testing::Test::HasFailure()) return;
              }
            }
          }
        }
      }
    }
  }
}

TEST(MoeRoutingCuda, MoeAlignBlockSizeMatchesReference) {
  for (int64_t e : {8, 64, 128, 256}) {
    for (int64_t topk : {1, 2, 8}) {
      if (topk > e) continue;
      for (int64_t m : {1, 2, 100, 1024, 8192}) {
        for (int64_t bs : {16, 64, 128}) {
          for (int skew = 0; skew < 2; ++skew) {  // uniform ids, or half the slots on expert e - 1
            for (bool with_map : {false, true}) {
              const uint32_t seed = next_seed();
              std::mt19937 rng(seed);
              std::uniform_int_distribution<int32_t> pick(0, int32_t(e - 1));
              std::vector<int32_t> ids(size_t(m * topk));
              for (auto& v : ids) v = (skew != 0 && (rng() & 1)) ? int32_t(e - 1) : pick(rng);
              // i32 or i64 ids (the kernels are instantiated per type).
              const bool ids64 = (seed & 4) != 0;
              const Tensor host_ids = ids64 ? Tensor::from_vector(std::vector<int64_t>(ids.begin(), ids.end()), {m, topk})
                                            : Tensor::from_vector(ids, {m, topk});
              Tensor map;
              if (with_map) map = ops::determine_expert_map(4, int64_t(seed % 4), e).second;
              const Case c{"moe_align_block_size", {m, topk}, host_ids.dtype(), DType::kI32, seed,
                           "E " + std::to_string(e) + " block " + std::to_string(bs) + (skew ? " skewed" : "") +
                               (with_map ? " expert_map" : "")};
              const auto want = ops::moe_align_block_size(ctx_of(host_ids), host_ids, bs, e, map, (seed & 2) != 0);
              const int64_t max_padded = want.sorted_token_ids.numel();
              poison_next_allocations({size_t(max_padded * 4), size_t(want.expert_ids.numel() * 4), 4});
              const auto got = ops::moe_align_block_size(ctx_of(host_ids.to(kCuda)), host_ids.to(kCuda), bs, e,
                                                         with_map ? map.to(kCuda) : Tensor(), (seed & 2) != 0);
              expect_same_tensor(c, "sorted_token_ids", got.sorted_token_ids, want.sorted_token_ids);
              expect_same_tensor(c, "expert_ids", got.expert_ids, want.expert_ids);
              expect_same_tensor(c, "num_tokens_post_padded", got.num_tokens_post_padded,
                                 want.num_tokens_post_padded);
              if (::testing::Test::HasFailure()) return;
            }
          }
        }
      }
    }
  }
}

TEST(MoeRoutingCuda, EplbMatchesReference) {
  // 64 logical experts, each with 1..3 replicas among 128 physical ones; ep 2 on rank 1 or no map.
  constexpr int64_t kLogical = 64, kPhysical = 128, kMaxReplicas = 3;
  for (int64_t m : {1, 77, 4096}) {
    for (bool with_map : {false, true}) {
      const uint32_t seed = next_seed();
      std::mt19937 rng(seed);
      std::vector<int64_t> l2p(static_cast<size_t>(kLogical * kMaxReplicas), -1);
      std::vector<int64_t> count(static_cast<size_t>(kLogical));
      std::vector<int64_t> physical(static_cast<size_t>(kPhysical));
      for (int64_t p = 0; p < kPhysical; ++p) physical[size_t(p)] = p;
      std::shuffle(physical.begin(), physical.end(), rng);
      int64_t next = 0;
      for (int64_t l = 0; l < kLogical; ++l) {
        count[size_t(l)] = 1 + int64_t(rng() % kMaxReplicas);
        for (int64_t r = 0; r < count[size_t(l)]; ++r) {
          l2p[size_t(l * kMaxReplicas + r)] = physical[size_t(next++ % kPhysical)];
        }
      }
      ops::SelectExpertsOptions o;
      o.top_k = 8;
      o.renormalize = true;
      o.enable_eplb = true;
      o.indices_type = with_map ? DType::kI64 : DType::kI32;
      o.logical_to_physical_map = Tensor::from_vector(l2p, {kLogical, kMaxReplicas});
      o.logical_replica_count = Tensor::from_vector(count);
      if (with_map) o.expert_map = ops::determine_expert_map(2, 1, kPhysical).second;
      const int64_t load_size = with_map ? kPhysical / 2 : kPhysical;
      o.expert_load_view = Tensor::zeros({load_size}, DType::kI64);
      const Tensor logits = make_logits(m, kLogical, DType::kBF16, Pattern::kRandom, seed);
      const Tensor hidden = Tensor::zeros({m, 1}, DType::kF32);
      const auto want = ops::select_experts(ctx_of(hidden), hidden, logits, o);

      ops::SelectExpertsOptions od = o;
      od.logical_to_physical_map = o.logical_to_physical_map.to(kCuda);
      od.logical_replica_count = o.logical_replica_count.to(kCuda);
      if (with_map) od.expert_map = o.expert_map.to(kCuda);
      od.expert_load_view = Tensor::zeros({load_size}, DType::kI64, kCuda);
      const auto got = ops::select_experts(ctx_of(hidden.to(kCuda)), hidden.to(kCuda), logits.to(kCuda), od);
      const Case c{"select_experts eplb", {m, kLogical}, DType::kBF16, DType::kI64, seed,
                   with_map ? "expert_map" : "no map"};
      expect_same_result(c, got, want);
      expect_same_tensor(c, "expert_load_view", od.expert_load_view, o.expert_load_view);
    }
  }
}

}  // namespace
}  // namespace fp8kit
