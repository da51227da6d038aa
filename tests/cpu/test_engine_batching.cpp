// fp8kit::Engine with several requests: sequences of different lengths batched together (prefill
// chunks and decodes in one step) give each sequence's solo result, sampling depends on the seed
// only, requests wait for KV blocks instead of failing, and an aborted request gives its blocks back.
#include <gtest/gtest.h>

#include "runner_test_util.h"
#include "test_dirs.h"

namespace fp8kit {
namespace {

using namespace runner_test;

RequestRun solo(const std::string& model, const EngineOptions& o, const std::vector<int32_t>& prompt,
                const GenerationParams& p) {
  Engine e(model, o);
  e.add_request(prompt, p);
  return run_all(e, reference_ctx(), 1)[0];
}

void expect_batch_equals_solo(const std::string& model, EngineOptions o) {
  const std::vector<std::vector<int32_t>> prompts = {ids(5, 128, 1), ids(23, 128, 2), ids(40, 128, 3)};
  GenerationParams p = greedy(4, /*logits=*/true);
  std::vector<RequestRun> alone;
  for (const auto& prompt : prompts) alone.push_back(solo(model, o, prompt, p));
  o.max_tokens_per_step = 16;  // the long prompts take several steps, next to the others' decodes
  Engine batched(model, o);
  for (const auto& prompt : prompts) batched.add_request(prompt, p);
  const std::vector<RequestRun> together = run_all(batched, reference_ctx(), prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(together[i].tokens, alone[i].tokens) << "request " << i;
    EXPECT_EQ(together[i].logits, alone[i].logits) << "request " << i;
  }
  EXPECT_GT(together[2].steps, alone[2].steps);  // it really was chunked
}

TEST(EngineBatching, SequencesOfDifferentLengthsGiveTheirSoloResults) {
  const std::string root = testing::scratch_dir();
  EngineOptions o;
  o.load.quantize = false;
  expect_batch_equals_solo(write_model(root + "/moe"), o);
  expect_batch_equals_solo(write_model(root + "/mixtral", small_spec(convert::SyntheticArchitecture::kMixtral)), o);
  o.kv_cache.dtype = "fp8";
  expect_batch_equals_solo(root + "/moe", o);
}

TEST(EngineBatching, Fp8SequencesGiveTheirSoloResults) {
  // Per-token and block activation scales are per row. (A MoE layer's dynamic per-tensor scale
  // covers the whole batch, as in vLLM, spec 2.7: there batching changes the result.)
  const std::string root = testing::scratch_dir();
  const std::string bf16 = write_model(root + "/bf16", small_spec(convert::SyntheticArchitecture::kQwen3Moe, false));
  expect_batch_equals_solo(quantize(bf16, root + "/per-tensor", QuantScheme::kPerTensor), {});
  expect_batch_equals_solo(quantize(write_model(root + "/moe"), root + "/block", QuantScheme::kBlock), {});
}

TEST(EngineBatching, SamplingDependsOnTheSeedOnly) {
  const std::string root = testing::scratch_dir();
  const std::string model = write_model(root + "/moe");
  EngineOptions o;
  o.load.quantize = false;
  GenerationParams p;
  p.max_tokens = 12;
  p.sampling.temperature = 1.0f;
  p.sampling.top_k = 50;
  p.seed = 42;
  const std::vector<int32_t> prompt = ids(7, 128, 8);
  const RequestRun a = solo(model, o, prompt, p);
  EXPECT_EQ(solo(model, o, prompt, p).tokens, a.tokens);
  Engine batched(model, o);
  GenerationParams other = p;
  other.seed = 7;
  batched.add_request(ids(19, 128, 9), other);
  batched.add_request(prompt, p);
  EXPECT_EQ(run_all(batched, reference_ctx(), 2)[1].tokens, a.tokens);
  p.seed = 43;
  EXPECT_NE(solo(model, o, prompt, p).tokens, a.tokens);
}

TEST(EngineBatching, RequestsWaitForKvBlocks) {
  const std::string root = testing::scratch_dir();
  EngineOptions o;
  o.load.quantize = false;
  o.kv_cache.num_tokens = 32;  // 2 blocks: one request of 20 + 8 tokens at a time
  Engine engine(write_model(root + "/moe"), o);
  engine.add_request(ids(20, 128, 1), greedy(8));
  engine.add_request(ids(20, 128, 2), greedy(8));
  const StepOutput first = engine.step(reference_ctx());
  ASSERT_EQ(first.outputs.size(), 1u);
  EXPECT_EQ(engine.num_waiting_requests(), 1);
  EXPECT_EQ(engine.kv_cache_info().free_blocks, 0);
  const std::vector<RequestRun> runs = run_all(engine, reference_ctx(), 2);
  EXPECT_EQ(runs[0].tokens.size(), 7u);  // the first token came in the first step
  EXPECT_EQ(runs[1].tokens.size(), 8u);
  EXPECT_EQ(engine.kv_cache_info().free_blocks, 2);
}

TEST(EngineBatching, AbortedRequestsGiveTheirBlocksBack) {
  const std::string root = testing::scratch_dir();
  EngineOptions o;
  o.load.quantize = false;
  o.kv_cache.num_tokens = 64;
  Engine engine(write_model(root + "/moe"), o);
  const int64_t id = engine.add_request(ids(30, 128, 1), greedy(20));
  engine.step(reference_ctx());
  EXPECT_LT(engine.kv_cache_info().free_blocks, 4);
  engine.abort_request(id);
  engine.abort_request(99);  // unknown: ignored
  EXPECT_FALSE(engine.has_unfinished_requests());
  EXPECT_EQ(engine.kv_cache_info().free_blocks, 4);
}

}  // namespace
}  // namespace fp8kit
