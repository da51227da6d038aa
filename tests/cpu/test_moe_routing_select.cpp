// select_experts on the CPU reference (src/ops/moe/moe_routing.cpp, routing_ref.cpp): the choice
// between grouped, plain and custom routing, indices_type, and EPLB (the deterministic replica of
// docs/compat.md, load counting through expert_map), with the exact error texts.
#include <gtest/gtest.h>

#include <vector>

#include "cpu/expect_error.h"
#include "cpu/test_quant_util.h"
#include "fp8kit/ops/moe_routing.h"
#include "moe_routing_test_util.h"
#include "test_context.h"

namespace fp8kit {
namespace {

using ops::SelectExpertsOptions;
using quant_test::make_tensor;
using testing::expect_invalid;
using namespace routing_test;

std::vector<int64_t> values_i64(const Tensor& t) {
  const int64_t* p = t.data<int64_t>();
  return std::vector<int64_t>(p, p + t.numel());
}

// `m` rows of [5, 0, 4, 0]: every token routes to logical experts 0 then 2 (topk 2).
Tensor rows_to_0_and_2(int64_t m) {
  std::vector<float> x;
  for (int64_t i = 0; i < m; ++i) x.insert(x.end(), {5.0f, 0.0f, 4.0f, 0.0f});
  return make_tensor(x, {m, 4});
}

// Logical expert l has replicas l2p[l][0 .. count[l]): 0 -> {0, 4}, 1 -> {1}, 2 -> {2, 5, 6}, 3 -> {3}.
SelectExpertsOptions eplb_options(int64_t num_load_entries) {
  SelectExpertsOptions o;
  o.top_k = 2;
  o.enable_eplb = true;
  o.logical_to_physical_map = Tensor::from_vector<int64_t>({0, 4, -1, 1, -1, -1, 2, 5, 6, 3, -1, -1}, {4, 3});
  o.logical_replica_count = Tensor::from_vector<int64_t>({2, 1, 3, 1});
  o.expert_load_view = Tensor::zeros({num_load_entries}, DType::kI64);
  return o;
}

TEST(MoeRoutingSelectExperts, PlainAndGroupedPathsMatchTheirOps) {
  const Tensor logits = make_tensor({0.1f, 2.0f, -1.0f, 0.5f, 3.0f, 0.0f, 1.0f, 1.5f}, {1, 8});
  SelectExpertsOptions o;
  o.top_k = 3;
  o.renormalize = true;
  const auto plain = ops::select_experts(cpu_ctx(), hidden(1), logits, o);
  const auto fused = ops::fused_topk(cpu_ctx(), hidden(1), logits, 3, true);
  EXPECT_EQ(ids_of(plain.ids), ids_of(fused.ids));
  EXPECT_EQ(weights_of(plain.weights), weights_of(fused.weights));
  EXPECT_EQ(ids_of(plain.ids), (std::vector<int64_t>{4, 1, 7}));

  o.use_grouped_topk = true;
  o.num_expert_group = 4;
  o.topk_group = 1;  // group 2 (experts 4, 5) holds the best expert
  o.top_k = 2;
  o.indices_type = DType::kI64;
  const auto grouped = ops::select_experts(cpu_ctx(), hidden(1), logits, o);
  EXPECT_EQ(grouped.ids.dtype(), DType::kI64);
  EXPECT_EQ(ids_of(grouped.ids), (std::vector<int64_t>{4, 5}));
}

TEST(MoeRoutingSelectExperts, CustomRoutingFunctionIsCalled) {
  SelectExpertsOptions o;
  o.top_k = 2;
  o.renormalize = true;
  int calls = 0;
  o.custom_routing_function = [&](const Tensor& h, const Tensor& g, int64_t topk, bool renormalize) {
    ++calls;
    EXPECT_EQ(h.size(0), 2);
    EXPECT_EQ(g.size(1), 4);
    EXPECT_EQ(topk, 2);
    EXPECT_TRUE(renormalize);
    return ops::TopkResult{make_tensor({0.75f, 0.25f, 0.5f, 0.5f}, {2, 2}),
                           Tensor::from_vector<int64_t>({3, 1, 0, 2}, {2, 2})};
  };
  const auto r = ops::select_experts(cpu_ctx(), hidden(2), make_tensor(std::vector<float>(8, 0.0f), {2, 4}), o);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(ids_of(r.ids), (std::vector<int64_t>{3, 1, 0, 2}));
  EXPECT_EQ(r.ids.dtype(), DType::kI64);
  EXPECT_EQ(weights_of(r.weights), (std::vector<float>{0.75f, 0.25f, 0.5f, 0.5f}));

  o.custom_routing_function = [](const Tensor&, const Tensor&, int64_t, bool) {
    return ops::TopkResult{Tensor::zeros({2, 3}, DType::kF32), Tensor::zeros({2, 2}, DType::kI32)};
  };
  expect_invalid([&] { ops::select_experts(cpu_ctx(), hidden(2), make_tensor(std::vector<float>(8, 0.0f), {2, 4}), o); },
                 "select_experts: `custom_routing_function` must return f32 weights of shape [2, 2] on cpu, got "
                 "f32[2, 3] on cpu");
}

TEST(MoeRoutingSelectExperts, EplbMapsToReplicasDeterministically) {
  // Slot s = m * 2 + k takes replica lowbias32(s) % count (hashes of 0..7 worked out by hand:
  // % 2 -> 0 0 1 1 1 0 1 0, % 3 -> 0 1 0 1 1 1 0 0).
  SelectExpertsOptions o = eplb_options(7);
  o.expert_load_view.data<int64_t>()[3] = 10;  // scatter_add: existing counts stay
  const auto r = ops::select_experts(cpu_ctx(), hidden(4), rows_to_0_and_2(4), o);
  EXPECT_EQ(ids_of(r.ids), (std::vector<int64_t>{0, 5, 4, 5, 4, 5, 4, 2}));
  EXPECT_EQ(r.ids.dtype(), DType::kI32);
  EXPECT_EQ(values_i64(o.expert_load_view), (std::vector<int64_t>{1, 0, 1, 10, 3, 3, 0}));
  // Weights are untouched by EPLB.
  EXPECT_EQ(weights_of(r.weights), weights_of(ops::fused_topk(cpu_ctx(), hidden(4), rows_to_0_and_2(4), 2, false).weights));

  // The same call again: the same ids, the load counted twice.
  o.indices_type = DType::kI64;
  const auto again = ops::select_experts(cpu_ctx(), hidden(4), rows_to_0_and_2(4), o);
  EXPECT_EQ(again.ids.dtype(), DType::kI64);
  EXPECT_EQ(ids_of(again.ids), ids_of(r.ids));
  EXPECT_EQ(values_i64(o.expert_load_view), (std::vector<int64_t>{2, 0, 2, 10, 6, 6, 0}));
}

TEST(MoeRoutingSelectExperts, EplbSpreadsLoadEvenlyOverReplicas) {
  constexpr int64_t kM = 3000;
  SelectExpertsOptions o = eplb_options(7);
  o.logical_to_physical_map = Tensor::from_vector<int32_t>({0, 4, -1, 1, -1, -1, 2, 5, 6, 3, -1, -1}, {4, 3});
  o.logical_replica_count = Tensor::from_vector<int32_t>({2, 1, 3, 1});
  const auto r = ops::select_experts(cpu_ctx(), hidden(kM), rows_to_0_and_2(kM), o);
  const auto ids = ids_of(r.ids);
  const auto load = values_i64(o.expert_load_view);
  std::vector<int64_t> histogram(7, 0);
  for (size_t s = 0; s < ids.size(); ++s) {
    if (s % 2 == 0) {
      ASSERT_TRUE(ids[s] == 0 || ids[s] == 4) << s;
    } else {
      ASSERT_TRUE(ids[s] == 2 || ids[s] == 5 || ids[s] == 6) << s;
    }
    ++histogram[size_t(ids[s])];
  }
  EXPECT_EQ(load, histogram);
  for (int64_t p : {0, 4}) EXPECT_NEAR(double(load[size_t(p)]), kM / 2.0, 0.1 * kM / 2) << p;
  for (int64_t p : {2, 5, 6}) EXPECT_NEAR(double(load[size_t(p)]), kM / 3.0, 0.1 * kM / 3) << p;
}

TEST(MoeRoutingSelectExperts, EplbCountsOnlyLocalExpertsAtTheirLocalIndex) {
  // This rank holds physical experts 2, 4 and 5 as local 0, 1, 2.
  SelectExpertsOptions o = eplb_options(3);
  o.expert_map = Tensor::from_vector<int32_t>({-1, -1, 0, -1, 1, 2, -1});
  const auto r = ops::select_experts(cpu_ctx(), hidden(4), rows_to_0_and_2(4), o);
  EXPECT_EQ(ids_of(r.ids), (std::vector<int64_t>{0, 5, 4, 5, 4, 5, 4, 2}));  // ids stay global
  EXPECT_EQ(values_i64(o.expert_load_view), (std::vector<int64_t>{1, 3, 3}));
}

TEST(MoeRoutingSelectExperts, Errors) {
  const Tensor logits = rows_to_0_and_2(2);
  SelectExpertsOptions o;
  o.top_k = 2;
  o.use_grouped_topk = true;
  o.num_expert_group = 2;
  expect_invalid([&] { ops::select_experts(cpu_ctx(), hidden(2), logits, o); },
                 "select_experts: use_grouped_topk requires `topk_group` and `num_expert_group`");
  o.use_grouped_topk = false;
  o.scoring_func = "sigmoid";
  expect_invalid([&] { ops::select_experts(cpu_ctx(), hidden(2), logits, o); },
                 "Only softmax scoring function is supported for non-grouped topk.");
  o.scoring_func = "softmax";
  o.indices_type = DType::kU8;
  expect_invalid([&] { ops::select_experts(cpu_ctx(), hidden(2), logits, o); },
                 "select_experts: `indices_type` must be i32 or i64, got u8");

  SelectExpertsOptions e = eplb_options(7);
  e.expert_load_view = Tensor();
  expect_invalid([&] { ops::select_experts(cpu_ctx(), hidden(2), logits, e); },
                 "select_experts: enable_eplb requires `expert_load_view`");
  e = eplb_options(7);
  e.expert_load_view = Tensor::zeros({7}, DType::kI32);
  expect_invalid([&] { ops::select_experts(cpu_ctx(), hidden(2), logits, e); },
                 "select_experts: `expert_load_view` must be a contiguous i64 tensor, got i32[7] on cpu");
  e = eplb_options(7);
  e.logical_replica_count = Tensor::from_vector<int64_t>({2, 1, 3});
  expect_invalid([&] { ops::select_experts(cpu_ctx(), hidden(2), logits, e); },
                 "select_experts: `logical_replica_count` has 3 entries but `logical_to_physical_map` has 4 rows");
  e = eplb_options(7);
  e.logical_replica_count = Tensor::from_vector<int64_t>({0, 1, 3, 1});
  expect_invalid([&] { ops::select_experts(cpu_ctx(), hidden(2), logits, e); },
                 "select_experts: `logical_replica_count`[0] = 0 is outside [1, 3]");
  e = eplb_options(4);  // physical ids up to 6 do not fit 4 load entries
  expect_invalid([&] { ops::select_experts(cpu_ctx(), hidden(2), logits, e); },
                 "select_experts: expert 5 is outside `expert_load_view` of 4 entries");
  e = eplb_options(7);
  e.expert_map = Tensor::from_vector<int32_t>({0, 1, 2});
  expect_invalid([&] { ops::select_experts(cpu_ctx(), hidden(2), logits, e); },
                 "select_experts: physical expert id 5 is outside [0, 3) (`expert_map` length)");
}

}  // namespace
}  // namespace fp8kit
