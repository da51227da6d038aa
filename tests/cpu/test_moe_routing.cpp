// MoE routing on the CPU reference (src/ops/moe/): the shared exp, fused_topk (ties, renormalize,
// dtypes), grouped_topk (DeepSeek-V3 bias rule, sigmoid, group masking, bf16 scores), and the
// argument errors with their exact texts. Hand-computed goldens first, then properties checked
// against an independent double-precision computation. select_experts and EPLB:
// test_moe_routing_select.cpp; expert maps and moe_align_block_size: test_moe_routing_align.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "cpu/expect_error.h"
#include "cpu/test_quant_util.h"
#include "fp8kit/ops/moe_routing.h"
#include "moe_routing_test_util.h"
#include "ops/moe/routing_math.h"
#include "test_context.h"

namespace fp8kit {
namespace {

using ops::GroupedTopkOptions;
using quant_test::make_tensor;
using testing::expect_invalid;
using namespace routing_test;

// Distance in units in the last place between two finite floats of one sign.
int64_t ulp_distance(float a, float b) {
  return std::abs(int64_t(float_to_bits(a)) - int64_t(float_to_bits(b)));
}

TEST(MoeRoutingMath, ExpWithinTwoUlpOfDouble) {
  int64_t worst = 0;
  for (float x = -103.0f; x < 88.0f; x += 0.0137f) {
    const float want = float(std::exp(double(x)));
    if (want < 1.1754944e-38f) continue;  // subnormal results: checked below
    worst = std::max(worst, ulp_distance(ops::routing::exp_f32(x), want));
  }
  EXPECT_LE(worst, 2);
  EXPECT_EQ(ops::routing::exp_f32(0.0f), 1.0f);
  EXPECT_EQ(ops::routing::exp_f32(-0.0f), 1.0f);
  EXPECT_EQ(ops::routing::exp_f32(-200.0f), 0.0f);
  EXPECT_TRUE(std::isinf(ops::routing::exp_f32(100.0f)));
  EXPECT_TRUE(std::isnan(ops::routing::exp_f32(std::nanf(""))));
  EXPECT_NEAR(ops::routing::exp_f32(-100.0f), std::exp(-100.0), 1e-45);  // subnormal, not flushed
  EXPECT_GT(ops::routing::exp_f32(-100.0f), 0.0f);
}

TEST(MoeRoutingMath, SigmoidMatchesDouble) {
  for (float x : {-20.0f, -3.0f, -1.0f, 0.0f, 0.5f, 1.0f, 2.0f, 3.0f, 20.0f}) {
    EXPECT_NEAR(ops::routing::sigmoid_f32(x), 1.0 / (1.0 + std::exp(-double(x))), 1e-7) << x;
  }
  EXPECT_EQ(ops::routing::sigmoid_f32(0.0f), 0.5f);
}

TEST(MoeRoutingFusedTopk, TiesGoToTheLowerIndex) {
  // Row 0: experts 1 and 2 tie for first; row 1: all equal.
  const Tensor logits = make_tensor({1, 3, 3, 0, 5, 5, 5, 5}, {2, 4});
  const auto r = ops::fused_topk(cpu_ctx(), hidden(2), logits, 2, false);
  EXPECT_EQ(ids_of(r.ids), (std::vector<int64_t>{1, 2, 0, 1}));
  EXPECT_EQ(r.ids.dtype(), DType::kI32);
  const double z = 2.0 + std::exp(-2.0) + std::exp(-3.0);
  const auto w = weights_of(r.weights);
  EXPECT_NEAR(w[0], 1.0 / z, 1e-7);
  EXPECT_EQ(w[0], w[1]);
  EXPECT_EQ(w[2], 0.25f);  // exp(0) * (1 / 4), exact
  EXPECT_EQ(w[3], 0.25f);
}

TEST(MoeRoutingFusedTopk, RenormalizeDividesByTheF32Sum) {
  const Tensor logits = make_tensor({1, 3, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {2, 6});
  const auto r = ops::fused_topk(cpu_ctx(), hidden(2), logits, 2, true);
  const auto w = weights_of(r.weights);
  EXPECT_EQ(w[0], 0.5f);  // w / (w + w)
  EXPECT_EQ(w[1], 0.5f);
  EXPECT_EQ(ids_of(r.ids), (std::vector<int64_t>{1, 2, 0, 1}));
  const auto r3 = ops::fused_topk(cpu_ctx(), hidden(2), logits, 3, true);
  const auto w3 = weights_of(r3.weights);
  // Row 1: three equal weights 1/6, renormalized: (1/6) / (3 * (1/6)) in f32.
  const float sixth = 1.0f / 6.0f;
  const float sum = (sixth + sixth) + sixth;
  EXPECT_EQ(w3[3], sixth / sum);
  EXPECT_NEAR(w3[3], 1.0 / 3.0, 1e-7);
}

TEST(MoeRoutingFusedTopk, MatchesDoubleSoftmaxOnRandomRows) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (int64_t e : {1, 3, 8, 60, 64, 256}) {
    const int64_t m = 17, topk = std::min<int64_t>(e, 8);
    std::vector<float> x(size_t(m * e));
    for (float& v : x) v = normal(rng);
    const auto r = ops::fused_topk(cpu_ctx(), hidden(m), make_tensor(x, {m, e}), topk, false);
    const auto ids = ids_of(r.ids);
    const auto w = weights_of(r.weights);
    for (int64_t row = 0; row < m; ++row) {
      const float* xr = &x[size_t(row * e)];
      std::vector<int64_t> order(static_cast<size_t>(e));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return xr[a] > xr[b]; });
      const double max_x = *std::max_element(xr, xr + e);
      double z = 0.0;
      for (int64_t j = 0; j < e; ++j) z += std::exp(double(xr[j]) - max_x);
      for (int64_t k = 0; k < topk; ++k) {
        ASSERT_EQ(ids[size_t(row * topk + k)], order[size_t(k)]) << "e " << e << " row " << row << " k " << k;
        const double want = std::exp(double(xr[order[size_t(k)]]) - max_x) / z;
        EXPECT_NEAR(w[size_t(row * topk + k)], want, 1e-6 * want + 1e-30) << "e " << e << " row " << row;
      }
    }
  }
}

TEST(MoeRoutingFusedTopk, HalfInputsAreWidenedAndIndicesTypeIsHonoured) {
  // Values exact in bf16 and f16: the f32 result must not depend on the input dtype.
  const std::vector<float> x = {0.5f, -1.25f, 2.0f, 0.75f, 3.5f, -2.0f, 1.0f, 0.0f};
  const auto ref = ops::fused_topk(cpu_ctx(), hidden(1), make_tensor(x, {1, 8}), 3, true);
  for (DType d : {DType::kBF16, DType::kF16}) {
    const auto r = ops::fused_topk(cpu_ctx(), hidden(1), make_tensor(x, {1, 8}, d), 3, true, DType::kI64);
    EXPECT_EQ(r.ids.dtype(), DType::kI64);
    EXPECT_EQ(ids_of(r.ids), (std::vector<int64_t>{4, 2, 6}));
    EXPECT_EQ(weights_of(r.weights), weights_of(ref.weights)) << dtype_name(d);
  }
}

TEST(MoeRoutingFusedTopk, StridedLogitsAreRead) {
  const Tensor wide = make_tensor({9, 1, 2, 9, 9, 3, 0, 9}, {2, 4});
  const Tensor logits = wide.narrow(1, 1, 2);  // [[1, 2], [3, 0]], row stride 4
  const auto r = ops::fused_topk(cpu_ctx(), hidden(2), logits, 1, false);
  EXPECT_EQ(ids_of(r.ids), (std::vector<int64_t>{1, 0}));
  const Tensor columns = make_tensor({1, 3, 2, 0}, {2, 2}).t();  // [[1, 2], [3, 0]], column stride 2
  EXPECT_EQ(ids_of(ops::fused_topk(cpu_ctx(), hidden(2), columns, 1, false).ids), (std::vector<int64_t>{1, 0}));
}

TEST(MoeRoutingFusedTopk, Errors) {
  const Tensor logits = make_tensor(std::vector<float>(8, 0.0f), {2, 4});
  expect_invalid([&] { ops::fused_topk(cpu_ctx(), hidden(3), logits, 2, false); }, "Number of tokens mismatch");
  expect_invalid([&] { ops::fused_topk(cpu_ctx(), hidden(2), logits, 5, false); },
                 "fused_topk: `topk` must be in [1, 4] (the number of experts), got 5");
  expect_invalid([&] { ops::fused_topk(cpu_ctx(), hidden(2), logits, 0, false); },
                 "fused_topk: `topk` must be in [1, 4] (the number of experts), got 0");
  expect_invalid([&] { ops::fused_topk(cpu_ctx(), hidden(2), logits, 2, false, DType::kI16); },
                 "fused_topk: `indices_type` must be i32 or i64, got i16");
  expect_invalid([&] { ops::fused_topk(cpu_ctx(), hidden(2), Tensor::zeros({2, 4}, DType::kI32), 2, false); },
                 "fused_topk: `gating_output` must be f32, f16 or bf16, got i32[2, 4] on cpu");
  expect_invalid([&] { ops::fused_topk(cpu_ctx(), hidden(8), logits.view({8}), 2, false); },
                 "fused_topk: `gating_output` must be 2-D, got f32[8] on cpu");
}

// E = 8 in G = 4 groups of 2, sigmoid scores s = sigmoid(x):
//   x    = [0,    1,     2,     -1,    3,     -3,    0.5,   0.5]
//   s    = [.5,   .731,  .881,  .269,  .953,  .047,  .622,  .622]
// With bias [0, 0, -1, 0, 0, 0, .2, .2] the keys are [.5, .731, -.119, .269, .953, .047, .822, .822]
// and the group scores (sum of the top 2) [1.231, .150, 1.0, 1.644]: groups 3 and 0 stay, so expert
// 4, the best key, is masked; top-3 of the keys left: 6, 7 (tie, lower first), 1. Weights are the
// unbiased scores. Without bias the group scores are the maxima [.731, .881, .953, .622]: groups 2
// and 1 stay and the top-3 are 4, 2, 3.
const std::vector<float> kGroupLogits = {0.0f, 1.0f, 2.0f, -1.0f, 3.0f, -3.0f, 0.5f, 0.5f};
const std::vector<float> kGroupBias = {0.0f, 0.0f, -1.0f, 0.0f, 0.0f, 0.0f, 0.2f, 0.2f};

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

TEST(MoeRoutingGroupedTopk, BiasSelectsGroupsByTopTwoSumAndWeightsAreUnbiased) {
  GroupedTopkOptions o;
  o.num_expert_group = 4;
  o.topk_group = 2;
  o.scoring_func = "sigmoid";
  o.e_score_correction_bias = make_tensor(kGroupBias, {8});
  const auto r = ops::grouped_topk(cpu_ctx(), hidden(1), make_tensor(kGroupLogits, {1, 8}), 3, false, o);
  EXPECT_EQ(ids_of(r.ids), (std::vector<int64_t>{6, 7, 1}));
  const auto w = weights_of(r.weights);
  EXPECT_NEAR(w[0], sigmoid(0.5), 1e-7);
  EXPECT_EQ(w[0], w[1]);
  EXPECT_NEAR(w[2], sigmoid(1.0), 1e-7);

  const auto rn = ops::grouped_topk(cpu_ctx(), hidden(1), make_tensor(kGroupLogits, {1, 8}), 3, true, o);
  const auto wn = weights_of(rn.weights);
  const double sum = 2 * sigmoid(0.5) + sigmoid(1.0);
  EXPECT_NEAR(wn[0], sigmoid(0.5) / sum, 1e-7);
  EXPECT_NEAR(wn[2], sigmoid(1.0) / sum, 1e-7);
}

TEST(MoeRoutingGroupedTopk, WithoutBiasGroupsAreScoredByTheirMaximum) {
  GroupedTopkOptions o;
  o.num_expert_group = 4;
  o.topk_group = 2;
  o.scoring_func = "sigmoid";
  const auto r = ops::grouped_topk(cpu_ctx(), hidden(1), make_tensor(kGroupLogits, {1, 8}), 3, false, o);
  EXPECT_EQ(ids_of(r.ids), (std::vector<int64_t>{4, 2, 3}));
  const auto w = weights_of(r.weights);
  EXPECT_NEAR(w[0], sigmoid(3.0), 1e-7);
  EXPECT_NEAR(w[1], sigmoid(2.0), 1e-7);
  EXPECT_NEAR(w[2], sigmoid(-1.0), 1e-7);
}

TEST(MoeRoutingGroupedTopk, TiedGroupsGoToTheLowerGroup) {
  // Four groups with the same maximum: groups 0 and 1 stay, whatever the other experts hold.
  GroupedTopkOptions o;
  o.num_expert_group = 4;
  o.topk_group = 2;
  const auto r = ops::grouped_topk(cpu_ctx(), hidden(1), make_tensor({1, 0, 0, 1, 1, 0.5f, 0.9f, 1}, {1, 8}), 4, false, o);
  EXPECT_EQ(ids_of(r.ids), (std::vector<int64_t>{0, 3, 1, 2}));
}

TEST(MoeRoutingGroupedTopk, AllGroupsEligibleEqualsFusedTopkBitForBit) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.5f);
  std::vector<float> x(size_t(9 * 64));
  for (float& v : x) v = normal(rng);
  const Tensor logits = make_tensor(x, {9, 64});
  GroupedTopkOptions o;
  o.num_expert_group = 8;
  o.topk_group = 8;
  for (bool renormalize : {false, true}) {
    const auto g = ops::grouped_topk(cpu_ctx(), hidden(9), logits, 6, renormalize, o);
    const auto f = ops::fused_topk(cpu_ctx(), hidden(9), logits, 6, renormalize);
    EXPECT_EQ(ids_of(g.ids), ids_of(f.ids));
    EXPECT_EQ(weights_of(g.weights), weights_of(f.weights));
  }
}

TEST(MoeRoutingGroupedTopk, Bf16ScoresAreRoundedToBf16) {
  // Scores in the dtype of gating_output: bf16(softmax_f32(x)); renormalize in bf16 steps.
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(size_t(4 * 16));
  for (float& v : x) v = bf16_to_float(float_to_bf16(normal(rng)));
  GroupedTopkOptions o;
  o.num_expert_group = 4;
  o.topk_group = 4;
  const auto g = ops::grouped_topk(cpu_ctx(), hidden(4), make_tensor(x, {4, 16}, DType::kBF16), 4, false, o);
  const auto f = ops::fused_topk(cpu_ctx(), hidden(4), make_tensor(x, {4, 16}), 4, false);
  const auto gw = weights_of(g.weights), fw = weights_of(f.weights);
  const auto gi = ids_of(g.ids), fi = ids_of(f.ids);
  for (size_t i = 0; i < gw.size(); ++i) {
    EXPECT_EQ(gw[i], bf16_to_float(float_to_bf16(fw[i]))) << i;
    EXPECT_EQ(float_to_bits(gw[i]) & 0xffffu, 0u) << i;
  }
  // bf16 rounding can tie two distinct f32 scores; ids then follow the lower index.
  for (size_t row = 0; row < 4; ++row) {
    std::set<int64_t> want(fi.begin() + long(row * 4), fi.begin() + long(row * 4 + 4));
    std::set<int64_t> got(gi.begin() + long(row * 4), gi.begin() + long(row * 4 + 4));
    if (std::set<float>(gw.begin() + long(row * 4), gw.begin() + long(row * 4 + 4)).size() == 4) {
      EXPECT_EQ(got, want) << row;
    }
  }
  const auto gn = ops::grouped_topk(cpu_ctx(), hidden(4), make_tensor(x, {4, 16}, DType::kBF16), 4, true, o);
  const auto gnw = weights_of(gn.weights);
  for (size_t row = 0; row < 4; ++row) {
    float sum = 0.0f;
    for (size_t k = 0; k < 4; ++k) sum += gw[row * 4 + k];
    sum = bf16_to_float(float_to_bf16(sum));
    for (size_t k = 0; k < 4; ++k) {
      EXPECT_EQ(gnw[row * 4 + k], bf16_to_float(float_to_bf16(gw[row * 4 + k] / sum))) << row << " " << k;
    }
  }
}

// DeepSeek-V3 routing shape: E = 256, G = 8, topk_group = 4, topk = 8, sigmoid plus bias.
// Checked against the rule computed independently in double: the chosen groups are the 4 with the
// largest top-2 biased sums, the 8 ids are the best biased keys inside them, weights are sigmoid.
TEST(MoeRoutingGroupedTopk, DeepSeekV3ShapeFollowsTheRule) {
  constexpr int64_t kE = 256, kG = 8, kTopkGroup = 4, kTopk = 8, kM = 32, kGroupSize = kE / kG;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::uniform_real_distribution<float> uniform(-0.5f, 0.5f);
  std::vector<float> x(static_cast<size_t>(kM * kE)), bias(static_cast<size_t>(kE));
  for (float& v : x) v = normal(rng);
  for (float& v : bias) v = uniform(rng);
  GroupedTopkOptions o;
  o.num_expert_group = kG;
  o.topk_group = kTopkGroup;
  o.scoring_func = "sigmoid";
  o.e_score_correction_bias = make_tensor(bias, {kE});
  const auto r = ops::grouped_topk(cpu_ctx(), hidden(kM), make_tensor(x, {kM, kE}), kTopk, true, o);
  const auto ids = ids_of(r.ids);
  const auto w = weights_of(r.weights);
  for (int64_t m = 0; m < kM; ++m) {
    std::vector<double> key(static_cast<size_t>(kE));
    for (int64_t j = 0; j < kE; ++j) key[size_t(j)] = sigmoid(x[size_t(m * kE + j)]) + bias[size_t(j)];
    std::vector<std::pair<double, int64_t>> groups;
    for (int64_t g = 0; g < kG; ++g) {
      std::vector<double> v(key.begin() + g * kGroupSize, key.begin() + (g + 1) * kGroupSize);
      std::sort(v.rbegin(), v.rend());
      groups.push_back({v[0] + v[1], g});
    }
    std::sort(groups.rbegin(), groups.rend());
    std::vector<std::pair<double, int64_t>> eligible;
    for (int64_t i = 0; i < kTopkGroup; ++i) {
      for (int64_t j = 0; j < kGroupSize; ++j) {
        const int64_t id = groups[size_t(i)].second * kGroupSize + j;
        eligible.push_back({key[size_t(id)], -id});
      }
    }
    std::sort(eligible.rbegin(), eligible.rend());
    double sum = 0.0;
    for (int64_t k = 0; k < kTopk; ++k) sum += sigmoid(x[size_t(m * kE - eligible[size_t(k)].second)]);
    for (int64_t k = 0; k < kTopk; ++k) {
      const int64_t want = -eligible[size_t(k)].second;
      ASSERT_EQ(ids[size_t(m * kTopk + k)], want) << "row " << m << " k " << k;
      EXPECT_NEAR(w[size_t(m * kTopk + k)], sigmoid(x[size_t(m * kE + want)]) / sum, 2e-7) << "row " << m;
    }
  }
}

TEST(MoeRoutingGroupedTopk, Errors) {
  const Tensor logits = make_tensor(std::vector<float>(16, 0.0f), {2, 8});
  GroupedTopkOptions o;
  o.num_expert_group = 4;
  o.topk_group = 2;
  o.scoring_func = "tanh";
  expect_invalid([&] { ops::grouped_topk(cpu_ctx(), hidden(2), logits, 2, false, o); }, "Unsupported scoring function: tanh");
  o.scoring_func = "softmax";
  expect_invalid([&] { ops::grouped_topk(cpu_ctx(), hidden(3), logits, 2, false, o); }, "Number of tokens mismatch");
  o.num_expert_group = 3;
  expect_invalid([&] { ops::grouped_topk(cpu_ctx(), hidden(2), logits, 2, false, o); },
                 "grouped_topk: the number of experts 8 is not divisible by `num_expert_group` 3");
  o.num_expert_group = 0;
  expect_invalid([&] { ops::grouped_topk(cpu_ctx(), hidden(2), logits, 2, false, o); },
                 "grouped_topk: `num_expert_group` must be positive, got 0");
  o.num_expert_group = 4;
  o.topk_group = 5;
  expect_invalid([&] { ops::grouped_topk(cpu_ctx(), hidden(2), logits, 2, false, o); },
                 "grouped_topk: `topk_group` must be in [1, 4] (`num_expert_group`), got 5");
  o.topk_group = 2;
  expect_invalid([&] { ops::grouped_topk(cpu_ctx(), hidden(2), logits, 5, false, o); },
                 "grouped_topk: `topk` 5 exceeds the 4 experts of the `topk_group` = 2 groups that stay eligible");
  expect_invalid([&] { ops::grouped_topk(cpu_ctx(), hidden(2), logits, 9, false, o); },
                 "grouped_topk: `topk` must be in [1, 8] (the number of experts), got 9");
  o.e_score_correction_bias = make_tensor(std::vector<float>(4, 0.0f), {4});
  expect_invalid([&] { ops::grouped_topk(cpu_ctx(), hidden(2), logits, 2, false, o); },
                 "grouped_topk: `e_score_correction_bias` must have shape [8], got f32[4] on cpu");
  o.num_expert_group = 8;
  o.e_score_correction_bias = make_tensor(std::vector<float>(8, 0.0f), {8});
  expect_invalid([&] { ops::grouped_topk(cpu_ctx(), hidden(2), logits, 2, false, o); },
                 "grouped_topk: `e_score_correction_bias` scores a group by its two best experts; groups of 1 "
                 "expert cannot be scored");
}

}  // namespace
}  // namespace fp8kit
