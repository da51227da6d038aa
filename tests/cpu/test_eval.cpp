// fp8kit::evaluate and its statistics (include/fp8kit/model/eval.h, src/model/eval/): KL
// divergence, agreement and probability change computed by hand, a model against itself, an FP8
// model against its BF16 base, window counts, and the errors for models that cannot be compared.
#include <gtest/gtest.h>

#include <cmath>

#include "expect_error.h"
#include "fp8kit/model/eval.h"
#include "model/eval/log_softmax_rows.h"
#include "runner_test_util.h"
#include "test_dirs.h"

namespace fp8kit {
namespace {

using namespace runner_test;

TEST(EvalStats, MatchHandComputedValues) {
  eval::Accumulator acc;
  const std::vector<double> base = {std::log(0.75), std::log(0.25)}, model = {std::log(0.5), std::log(0.5)};
  acc.add_distribution(base, model, 1);
  acc.add_nll(-model[1], -base[1]);
  acc.add_distribution(base, base, 0);
  acc.add_nll(-base[0], -base[0]);
  const DistributionStats s = acc.distribution();
  const double kl = 0.75 * std::log(1.5) + 0.25 * std::log(0.5);  // 0.130812
  EXPECT_NEAR(s.kld_mean, kl / 2, 1e-15);
  EXPECT_NEAR(s.kld_max, kl, 1e-15);
  EXPECT_NEAR(s.kld_median, kl / 2, 1e-15);             // halfway between the two, as numpy's percentile
  EXPECT_NEAR(s.kld_p99, 0.99 * kl, 1e-15);
  EXPECT_NEAR(s.kld_stderr, std::sqrt(kl * kl / 2 / 2), 1e-15);  // sample std kl / sqrt(2), over sqrt(2)
  EXPECT_EQ(s.top1_agreement, 1.0);                     // the tie of 0.5 / 0.5 goes to the lower id
  EXPECT_NEAR(s.delta_p_rms, std::sqrt(0.25 * 0.25 / 2), 1e-15);
  EXPECT_NEAR(acc.ppl(), std::exp((std::log(2.0) - std::log(0.75)) / 2), 1e-12);
  EXPECT_NEAR(acc.base_ppl(), std::exp(-(std::log(0.25) + std::log(0.75)) / 2), 1e-12);
}

TEST(EvalStats, LogSoftmaxOfARowAndItsErrors) {
  Tensor logits = Tensor::empty({2, 3}, DType::kBF16);
  const float values[] = {1.0f, 2.0f, 3.0f, 0.0f, NAN, 1.0f};
  for (int i = 0; i < 6; ++i) logits.data<BFloat16>()[i] = float_to_bf16(values[i]);
  std::vector<double> out;
  eval::log_softmax_row(logits, 0, out, "row 0");
  const double lse = 3.0 + std::log(std::exp(-2.0) + std::exp(-1.0) + 1.0);
  EXPECT_NEAR(out[0], 1.0 - lse, 1e-15);
  EXPECT_NEAR(out[2], 3.0 - lse, 1e-15);
  testing::expect_invalid([&] { eval::log_softmax_row(logits, 1, out, "model: window 0, position 3"); },
                          "eval: model: window 0, position 3: logit of token 1 is nan");
}

TEST(Eval, AModelAgainstItselfAgreesExactly) {
  const std::string root = testing::scratch_dir();
  EngineOptions o;
  o.load.quantize = false;
  o.kv_cache.num_tokens = 32;
  Engine a(write_model(root + "/moe"), o), b(root + "/moe", o);
  const std::vector<int32_t> tokens = ids(100, 128, 3);
  EvalOptions e;
  e.ctx = 32;
  int64_t progress = 0;
  e.progress = [&](int64_t done, int64_t total) {
    EXPECT_EQ(total, 3);
    progress = done;
  };
  const EvalResult r = evaluate(reference_ctx(), a, &b, tokens, e);
  EXPECT_EQ(progress, 3);
  EXPECT_EQ(r.windows, 3);
  EXPECT_EQ(r.tokens, 3 * 15);  // rows 16..30 of each window score tokens 17..31
  ASSERT_TRUE(r.base_ppl && r.vs_base);
  EXPECT_EQ(r.ppl, *r.base_ppl);
  EXPECT_EQ(r.vs_base->kld_max, 0.0);
  EXPECT_EQ(r.vs_base->top1_agreement, 1.0);
  EXPECT_EQ(r.vs_base->delta_p_rms, 0.0);
  EXPECT_TRUE(r.ppl > 1 && r.ppl < 1000) << r.ppl;

  e.progress = nullptr;
  e.first = 0;
  e.max_windows = 2;
  EXPECT_EQ(evaluate(reference_ctx(), a, nullptr, tokens, e).tokens, 2 * 31);
}

TEST(Eval, Fp8AgainstBf16ShowsTheQuantization) {
  const std::string root = testing::scratch_dir();
  const std::string bf16 = write_model(root + "/bf16", small_spec(convert::SyntheticArchitecture::kQwen3Moe, false));
  EngineOptions o;
  o.kv_cache.num_tokens = 64;
  Engine fp8(quantize(bf16, root + "/fp8", QuantScheme::kPerTensor), o);
  o.load.quantize = false;
  Engine base(bf16, o);
  EvalOptions e;
  e.ctx = 64;
  const EvalResult r = evaluate(reference_ctx(), fp8, &base, ids(128, 128, 4), e);
  ASSERT_TRUE(r.vs_base);
  EXPECT_TRUE(r.vs_base->kld_mean > 0 && r.vs_base->kld_mean < 0.5) << r.vs_base->kld_mean;
  EXPECT_TRUE(r.vs_base->top1_agreement > 0.5 && r.vs_base->top1_agreement <= 1.0) << r.vs_base->top1_agreement;
  EXPECT_TRUE(r.vs_base->kld_median <= r.vs_base->kld_p99 && r.vs_base->kld_p99 <= r.vs_base->kld_max);
  EXPECT_NE(r.ppl, *r.base_ppl);
}

TEST(Eval, RefusesModelsThatCannotBeCompared) {
  const std::string root = testing::scratch_dir();
  EngineOptions o;
  o.load.quantize = false;
  convert::SyntheticModelSpec big_vocab = small_spec();
  big_vocab.vocab_size = 256;
  Engine qwen(write_model(root + "/qwen"), o), wide(write_model(root + "/wide", big_vocab), o);
  Engine mixtral(write_model(root + "/mixtral", small_spec(convert::SyntheticArchitecture::kMixtral)), o);
  const std::vector<int32_t> tokens = ids(64, 128, 5);
  EvalOptions e;
  e.ctx = 32;
  testing::expect_invalid([&] { evaluate(reference_ctx(), qwen, &wide, tokens, e); },
                          "eval: " + root + "/qwen has a vocabulary of 128 tokens but the base " + root + "/wide has 256");
  testing::expect_invalid([&] { evaluate(reference_ctx(), qwen, &mixtral, tokens, e); },
                          "eval: " + root + "/qwen is Qwen3MoeForCausalLM but the base " + root +
                              "/mixtral is MixtralForCausalLM");
  testing::expect_invalid([&] { evaluate(reference_ctx(), qwen, nullptr, ids(20, 128, 1), e); },
                          "eval: 20 tokens do not fill one window of 32");
  e.first = 31;
  testing::expect_invalid([&] { evaluate(reference_ctx(), qwen, nullptr, tokens, e); },
                          "eval: the first scored row must be in [0, 30], got 31");
}

}  // namespace
}  // namespace fp8kit
