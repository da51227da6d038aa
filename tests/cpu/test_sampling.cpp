// sample on the CPU (src/ops/sampling/): greedy (ties to the lowest id), the raw logprobs, ranks
// and top-n, the processed distributions exactly (temperature, min-p, top-k, top-p in vLLM's
// order, their tie rules), draw frequencies against the binomial bounds with fixed seeds
// (deterministic), the same samples for a (seed, step) whatever the batch, the PRNG's
// definition, and the errors (NaN and +inf logits included).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>

#include "expect_error.h"
#include "fp8kit/ops/sampling.h"
#include "ops/sampling/sampling_ref.h"
#include "ops/sampling/sampling_rng.h"
#include "ops_test_util.h"

namespace fp8kit {
namespace {

using ops::SamplingParams;
using ops_test::make_tensor;
using testing::expect_error;
using testing::expect_invalid;

const float kNegInf = -std::numeric_limits<float>::infinity();

SamplingParams greedy() {
  SamplingParams p;
  p.temperature = 0.0f;
  return p;
}

std::vector<float> logs(const std::vector<double>& probs) {
  std::vector<float> x;
  for (double q : probs) x.push_back(float(std::log(q)));
  return x;
}

TEST(Sampling, GreedyTiesToTheLowestIdAndIgnoresFilters) {
  ForwardContext ctx;
  for (DType dt : ops_test::kFloatDTypes) {
    const Tensor logits = make_tensor({1, 3, 3, kNegInf, 0.5f, 0.25f, 0.5f, 0.125f, -2, -1, -1, -3}, {3, 4}, dt);
    SamplingParams a = greedy(), b = greedy(), c = greedy();
    b.temperature = 0.9e-5f;  // below vLLM's 1e-5: greedy
    c.top_k = 1, c.top_p = 0.1f, c.min_p = 0.9f;
    const auto r = ops::sample(ctx, logits, {a, b, c});
    EXPECT_EQ(r.token_ids.data<int64_t>()[0], 1);
    EXPECT_EQ(r.token_ids.data<int64_t>()[1], 0);
    EXPECT_EQ(r.token_ids.data<int64_t>()[2], 1);
  }
}

TEST(Sampling, RawLogprobsRanksAndTopN) {
  ForwardContext ctx;
  // Row 0: (1, 2, 3, 0): logsumexp = 3 + ln(1 + e^-1 + e^-2 + e^-3) = 3.44018969.. Row 1: four equal
  // logits, -ln 4 each, all of rank 4 (vLLM counts logprobs >= the token's).
  const Tensor logits = make_tensor({1, 2, 3, 0, 5, 5, 5, 5}, {2, 4});
  SamplingParams hot;  // temperature 0.5: the logprobs stay those of the raw logits
  hot.temperature = 0.5f;
  ops::SamplingOptions o;
  o.num_logprobs = 2;
  const auto r = ops::sample(ctx, logits, {greedy(), hot}, o);
  const double lse0 = 3 + std::log(1 + std::exp(-1.0) + std::exp(-2.0) + std::exp(-3.0)), lse1 = 5 + std::log(4.0);
  EXPECT_EQ(r.token_ids.data<int64_t>()[0], 2);
  EXPECT_EQ(r.logprobs.data<float>()[0], float(3 - lse0));
  EXPECT_EQ(r.ranks.data<int64_t>()[0], 1);
  EXPECT_EQ(r.top_ids.data<int64_t>()[0], 2);
  EXPECT_EQ(r.top_ids.data<int64_t>()[1], 1);
  EXPECT_EQ(r.top_logprobs.data<float>()[0], float(3 - lse0));
  EXPECT_EQ(r.top_logprobs.data<float>()[1], float(2 - lse0));
  EXPECT_EQ(r.logprobs.data<float>()[1], float(5 - lse1));
  EXPECT_EQ(r.ranks.data<int64_t>()[1], 4);
  EXPECT_EQ(r.top_ids.data<int64_t>()[2], 0);  // ties: the lower ids first
  EXPECT_EQ(r.top_ids.data<int64_t>()[3], 1);
  // -inf logits have -inf logprobs.
  const auto z = ops::sample(ctx, make_tensor({kNegInf, 0}, {1, 2}), {greedy()}, {2});
  EXPECT_EQ(z.top_logprobs.data<float>()[1], kNegInf);
  EXPECT_EQ(z.logprobs.data<float>()[0], 0.0f);
}

void expect_probs(const std::vector<float>& x, const SamplingParams& p, const std::vector<double>& expected) {
  const std::vector<float> got = ops::sampling_probs_ref(x, p);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t v = 0; v < got.size(); ++v) {
    if (expected[v] == 0) {
      EXPECT_EQ(got[v], 0.0f) << "token " << v << " must be excluded";
    } else {
      EXPECT_TRUE(std::fabs(got[v] - expected[v]) <= 1e-6) << "token " << v << ": " << got[v] << " vs " << expected[v];
    }
  }
}

TEST(Sampling, FiltersExcludeExactly) {
  const std::vector<float> x = logs({0.1, 0.2, 0.3, 0.4});
  SamplingParams p;
  expect_probs(x, p, {0.1, 0.2, 0.3, 0.4});
  p.top_k = 2;
  expect_probs(x, p, {0, 0, 3.0 / 7, 4.0 / 7});
  p = {};
  p.top_p = 0.5f;  // ascending cumulative sums 0.1, 0.3, 0.6, 1: the first two are <= 0.5
  expect_probs(x, p, {0, 0, 3.0 / 7, 4.0 / 7});
  p.top_p = 0.75f;  // only 0.1 <= 0.25
  expect_probs(x, p, {0, 2.0 / 9, 3.0 / 9, 4.0 / 9});
  p.top_p = 0.01f;  // the largest always stays
  expect_probs(x, p, {0, 0, 0, 1});
  p = {};
  p.min_p = 0.6f;  // threshold 0.4 * 0.6 = 0.24
  expect_probs(x, p, {0, 0, 3.0 / 7, 4.0 / 7});
  p.min_p = 0.4f;  // threshold 0.16
  expect_probs(x, p, {0, 2.0 / 9, 3.0 / 9, 4.0 / 9});
  // Temperature 2: p ~ sqrt(p).
  p = {};
  p.temperature = 2.0f;
  const double s = std::sqrt(0.1) + std::sqrt(0.2) + std::sqrt(0.3) + std::sqrt(0.4);
  expect_probs(x, p, {std::sqrt(0.1) / s, std::sqrt(0.2) / s, std::sqrt(0.3) / s, std::sqrt(0.4) / s});
}

TEST(Sampling, FilterOrderAndTies) {
  const std::vector<float> x = logs({0.1, 0.2, 0.3, 0.4});
  // vLLM applies top-p to the distribution top-k left: after top-k 2 it is (3/7, 4/7), and 3/7
  // <= 0.5 goes too. (Top-p alone would keep both.)
  SamplingParams p;
  p.top_k = 2, p.top_p = 0.5f;
  expect_probs(x, p, {0, 0, 0, 1});
  // min-p before top-k: min-p 0.3 (threshold 0.12) drops 0.1, then top-k 3 keeps the rest.
  p = {};
  p.min_p = 0.3f, p.top_k = 3;
  expect_probs(x, p, {0, 2.0 / 9, 3.0 / 9, 4.0 / 9});
  // Top-k keeps every logit equal to the k-th largest.
  p = {};
  p.top_k = 2;
  expect_probs({1, 2, 2, 2, 0}, p, {0, 1.0 / 3, 1.0 / 3, 1.0 / 3, 0});
  // Top-p among equal logits drops the higher ids first: cumulative 0.25 (id 3), 0.5 (id 2) <= 0.5.
  p = {};
  p.top_p = 0.5f;
  expect_probs({0, 0, 0, 0}, p, {0.5, 0.5, 0, 0});
  // top_k <= 0 or >= vocab is off.
  p = {};
  p.top_k = 4;
  expect_probs(x, p, {0.1, 0.2, 0.3, 0.4});
  p.top_k = -1;
  expect_probs(x, p, {0.1, 0.2, 0.3, 0.4});
}

// Draws N tokens of one row (step = 0..N-1 of one seed) and checks every token's count within
// 5 binomial standard deviations of N p (deterministic: the seed is fixed).
void expect_frequencies(const std::vector<float>& x, const SamplingParams& base, const std::vector<double>& p,
                        DType dt) {
  ForwardContext ctx;
  const int64_t n = 20000, vocab = int64_t(x.size());
  std::vector<float> rows;
  std::vector<SamplingParams> params;
  for (int64_t i = 0; i < n; ++i) {
    rows.insert(rows.end(), x.begin(), x.end());
    SamplingParams sp = base;
    sp.seed = 20240601;
    sp.step = uint64_t(i);
    params.push_back(sp);
  }
  const auto r = ops::sample(ctx, make_tensor(rows, {n, vocab}, dt), params);
  std::vector<int64_t> counts(size_t(vocab), 0);
  for (int64_t i = 0; i < n; ++i) ++counts[size_t(r.token_ids.data<int64_t>()[i])];
  for (int64_t v = 0; v < vocab; ++v) {
    const double mean = double(n) * p[size_t(v)], sd = std::sqrt(double(n) * p[size_t(v)] * (1 - p[size_t(v)]));
    if (p[size_t(v)] == 0) {
      EXPECT_EQ(counts[size_t(v)], 0) << "token " << v;
    } else {
      EXPECT_TRUE(std::fabs(double(counts[size_t(v)]) - mean) <= 5 * sd)
          << "token " << v << ": " << counts[size_t(v)] << " draws, expected " << mean << " +- " << 5 * sd;
    }
  }
}

TEST(Sampling, DrawFrequenciesMatchTheDistribution) {
  const std::vector<float> x = logs({0.1, 0.2, 0.3, 0.4});
  SamplingParams p;
  for (DType dt : ops_test::kFloatDTypes) expect_frequencies(x, p, {0.1, 0.2, 0.3, 0.4}, dt);
  p.temperature = 2.0f;
  const double s = std::sqrt(0.1) + std::sqrt(0.2) + std::sqrt(0.3) + std::sqrt(0.4);
  expect_frequencies(x, p, {std::sqrt(0.1) / s, std::sqrt(0.2) / s, std::sqrt(0.3) / s, std::sqrt(0.4) / s},
                     DType::kF32);
  p = {};
  p.top_k = 3;
  expect_frequencies(x, p, {0, 2.0 / 9, 3.0 / 9, 4.0 / 9}, DType::kF32);
  p = {};
  p.top_p = 0.75f;
  p.temperature = 0.5f;  // p^2 / sum: (1, 4, 9, 16) / 30, then top-p 0.75 drops 1/30 and 4/30 (cumulative 5/30 <= 0.25)
  expect_frequencies(x, p, {0, 0, 9.0 / 25, 16.0 / 25}, DType::kF32);
}

TEST(Sampling, SameSamplesWhateverTheBatch) {
  ForwardContext ctx;
  Overrides one;
  one.num_threads = 1;
  ForwardContext ctx1(Device::cpu(), one);
  const int64_t vocab = 1000, n = 40;
  std::mt19937 gen(7);
  std::vector<std::vector<float>> rows;
  std::vector<SamplingParams> params;
  for (int64_t i = 0; i < n; ++i) {
    rows.push_back(ops_test::normal_values(size_t(vocab), uint32_t(100 + i), 3.0f));
    SamplingParams sp;
    sp.temperature = 0.7f + 0.01f * float(i);
    sp.top_k = i % 3 == 0 ? 50 : 0;
    sp.top_p = i % 4 == 0 ? 0.9f : 1.0f;
    sp.min_p = i % 5 == 0 ? 0.05f : 0.0f;
    sp.seed = 1000 + uint64_t(i) * 7919;
    sp.step = uint64_t(i % 6);
    params.push_back(sp);
  }
  auto run = [&](const std::vector<int64_t>& order, const ForwardContext& c) {
    std::vector<float> flat;
    std::vector<SamplingParams> ps;
    for (int64_t i : order)
      flat.insert(flat.end(), rows[size_t(i)].begin(), rows[size_t(i)].end()), ps.push_back(params[size_t(i)]);
    const auto r = ops::sample(c, make_tensor(flat, {int64_t(order.size()), vocab}), ps);
    std::map<int64_t, int64_t> by_request;
    for (size_t k = 0; k < order.size(); ++k) by_request[order[k]] = r.token_ids.data<int64_t>()[k];
    return by_request;
  };
  std::vector<int64_t> all(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) all[size_t(i)] = i;
  const auto reference = run(all, ctx);
  std::vector<int64_t> shuffled = all;
  std::shuffle(shuffled.begin(), shuffled.end(), gen);
  EXPECT_EQ(run(shuffled, ctx), reference);
  EXPECT_EQ(run(all, ctx1), reference);
  for (int64_t i = 0; i < n; i += 7) {
    const auto alone = run({i}, ctx);
    EXPECT_EQ(alone.at(i), reference.at(i)) << "request " << i << " alone";
  }
  // The seeds matter: the same row under different seeds gives different tokens.
  std::vector<float> flat;
  std::vector<SamplingParams> ps;
  for (int64_t s = 0; s < 20; ++s) {
    flat.insert(flat.end(), rows[1].begin(), rows[1].end());
    SamplingParams sp = params[1];
    sp.temperature = 5.0f;
    sp.seed = uint64_t(s);
    ps.push_back(sp);
  }
  const auto r = ops::sample(ctx, make_tensor(flat, {20, vocab}), ps);
  std::vector<int64_t> tokens(r.token_ids.data<int64_t>(), r.token_ids.data<int64_t>() + 20);
  std::sort(tokens.begin(), tokens.end());
  EXPECT_GT(std::unique(tokens.begin(), tokens.end()) - tokens.begin(), 10);
}

TEST(Sampling, PrngDefinition) {
  // splitmix64's first output from state 0 (the published reference value), and the keyed
  // draws: pure functions of (seed, step, token), in (0, 1).
  EXPECT_EQ(ops::splitmix64(0), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(ops::sampling_bits(1, 2, 3), ops::splitmix64(ops::splitmix64(ops::splitmix64(1) ^ 2) ^ 3));
  double lo = 1, hi = 0, mean = 0;
  for (uint64_t v = 0; v < 100000; ++v) {
    const double u = ops::sampling_uniform(42, 7, v);
    lo = std::min(lo, u), hi = std::max(hi, u), mean += u;
  }
  EXPECT_GT(lo, 0.0);
  EXPECT_LT(hi, 1.0);
  EXPECT_NEAR(mean / 100000, 0.5, 5 * std::sqrt(1.0 / 12 / 100000));
  EXPECT_NE(ops::sampling_uniform(42, 7, 0), ops::sampling_uniform(42, 8, 0));
  EXPECT_NE(ops::sampling_uniform(42, 7, 0), ops::sampling_uniform(43, 7, 0));
}

TEST(Sampling, Errors) {
  ForwardContext ctx;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor ok = make_tensor({1, 2, 3, 4}, {2, 2});
  expect_invalid(
      [&] {
        ops::sample(ctx, make_tensor({1, 2, 3, nan}, {2, 2}), {{}, {}});
      },
      "sampling: logits[1, 1] is NaN");
  expect_invalid(
      [&] {
        ops::sample(ctx, make_tensor({1, INFINITY, 3, 4}, {2, 2}, DType::kBF16), {{}, {}});
      },
      "sampling: logits[0, 1] is +inf");
  expect_invalid(
      [&] {
        ops::sample(ctx, make_tensor({1, 2, kNegInf, kNegInf}, {2, 2}), {{}, {}});
      },
      "sampling: every logit of row 1 is -inf");
  expect_invalid([&] { ops::sample(ctx, ok, {{}}); }, "sampling: 1 SamplingParams for 2 rows of `logits`");
  SamplingParams bad;
  bad.top_p = 0.0f;
  expect_invalid([&] { ops::sample(ctx, ok, {{}, bad}); }, "sampling: params[1].top_p must be in (0, 1], got 0");
  bad = {};
  bad.min_p = 1.5f;
  expect_invalid([&] { ops::sample(ctx, ok, {bad, {}}); }, "sampling: params[0].min_p must be in [0, 1], got 1.5");
  bad = {};
  bad.temperature = -1.0f;
  expect_invalid(
      [&] {
        ops::sample(ctx, ok, {bad, {}});
      },
      "sampling: params[0].temperature must be finite and >= 0, got -1");
  expect_invalid(
      [&] {
        ops::sample(ctx, ok, {{}, {}}, {3});
      },
      "sampling: `num_logprobs` must be in [0, vocab = 2], got 3");
  expect_invalid(
      [&] {
        ops::sample(ctx, Tensor::empty({2, 0}, DType::kF32), {{}, {}});
      },
      "sampling: `logits` must have 1 to 2^31 - 1 columns, got f32[2, 0] on cpu");
  expect_invalid(
      [&] {
        ops::sample(ctx, ok.t(), {{}, {}});
      },
      "sampling: the last dimension of `logits` must be contiguous, got strides [1, 2]");
  expect_error(
      [&] {
        ops::sample(ctx, ops_test::fake_cuda_tensor({2, 2}, DType::kF32), {{}, {}});
      },
      ErrorCode::kInvalidArgument, "sampling: `logits` is on cuda:0 but the context is on cpu");
  ForwardContext cuda_ctx(Device::cuda(0));
  expect_error(
      [&] {
        ops::sample(cuda_ctx, ops_test::fake_cuda_tensor({2, 2}, DType::kF32), {{}, {}});
      },
      ErrorCode::kUnsupported,
      "sampling: on CUDA only greedy rows are sampled (row 0 has temperature 1); sample that row on the host");
  // An empty batch.
  EXPECT_EQ(ops::sample(ctx, Tensor::empty({0, 5}, DType::kF32), {}).token_ids.numel(), 0);
}

}  // namespace
}  // namespace fp8kit
