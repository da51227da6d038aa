// fused_experts on the CPU: expert parallelism (expert_map; each rank holds only its experts'
// weights), chunking (FP8KIT_FUSED_MOE_CHUNK_SIZE and options.chunk_size), the in-place path and
// fast_accum (FP8KIT_MOE_FAST_ACCUM) on the CPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "expect_error.h"
#include "moe_test_util.h"

namespace fp8kit {
namespace {

using namespace moe_test;

// The inputs of rank `rank` of `ranks`: vLLM's determine_expert_map layout (contiguous ranges,
// the last rank takes the remainder) and the weights and scales of its local experts only.
Inputs rank_inputs(const Inputs& all, int64_t e, int64_t rank, int64_t ranks) {
  const int64_t local = e / ranks, start = rank * local, count = rank == ranks - 1 ? e - start : local;
  Inputs in = all;
  in.w1 = all.w1.narrow(0, start, count).contiguous();
  in.w2 = all.w2.narrow(0, start, count).contiguous();
  if (all.options.w1_scale.defined()) {
    in.options.w1_scale = all.options.w1_scale.narrow(0, start, count).contiguous();
    in.options.w2_scale = all.options.w2_scale.narrow(0, start, count).contiguous();
  }
  std::vector<int32_t> map(size_t(e), -1);
  for (int64_t i = 0; i < count; ++i) map[size_t(start + i)] = int32_t(i);
  in.options.expert_map = Tensor::from_vector(map);
  in.options.global_num_experts = e;
  return in;
}

// The all-reduce of the rank outputs: summed in f32, rounded once to the dtype.
std::vector<double> sum_over_ranks(const Inputs& all, int64_t e, int64_t ranks, DType dtype) {
  std::vector<double> total;
  for (int64_t r = 0; r < ranks; ++r) {
    const std::vector<double> y = values(run(rank_inputs(all, e, r, ranks)));
    if (total.empty()) total.assign(y.size(), 0.0);
    for (size_t i = 0; i < y.size(); ++i) total[i] = float(total[i]) + float(y[i]);
  }
  for (double& v : total) v = round_to(v, dtype);
  return total;
}

// top_k 2: a token's two contributions are either on one rank (that rank's moe_sum rounds a + b)
// or on two (the all-reduce rounds a + b), so the sum over ranks is exactly the one-rank result.
TEST(FusedExpertsParallel, ExpertMapSumsToSingleRankExactly) {
  for (const bool block : {false, true}) {
    for (const int64_t ranks : {2, 4}) {
      SCOPED_TRACE(::testing::Message() << (block ? "block" : "per-tensor static") << ", ranks " << ranks);
      const RandomProblem r = random_problem(40, 128, 64, 8, 2, 31, block ? std::optional(std::make_pair(64, 64))
                                                                          : std::nullopt);
      OracleOptions o;
      if (!block) {  // static scales: the same on every rank; block scales are per row anyway
        o.a1_scale = 0.01f;
        o.a2_scale = 0.002f;
      }
      const Inputs all = inputs(r.p, o);
      const std::vector<double> single = values(run(all));
      EXPECT_EQ(mismatches(sum_over_ranks(all, 8, ranks, DType::kBF16), single, "ranks"), 0);
    }
  }
}

// top_k 8 over 64 experts (bf16; the sums over ranks round differently, so a tight tolerance), and
// the dynamic per-tensor scale of the intermediate, which each rank takes over its own slots
// (rows of other ranks' experts are zero): close, not equal.
TEST(FusedExpertsParallel, ExpertMapTopk8AndDynamicScales) {
  const RandomProblem r = random_problem(24, 128, 64, 64, 8, 32);
  OracleOptions stat;
  stat.a1_scale = 0.01f;
  stat.a2_scale = 0.002f;
  const Inputs all = inputs(r.p, stat);
  const std::vector<double> single = values(run(all));
  for (const int64_t ranks : {2, 4}) {
    const double err = max_error_vs_peak(sum_over_ranks(all, 64, ranks, DType::kBF16), single);
    EXPECT_TRUE(err <= 1e-2) << ranks << " ranks: " << err;  // a few bf16 steps of the peak
  }
  const Inputs dyn = inputs(r.p, OracleOptions{});
  const double err = rel_l2_error(sum_over_ranks(dyn, 64, 4, DType::kBF16), values(run(dyn)));
  EXPECT_TRUE(err <= 0.05) << err;
}

TEST(FusedExpertsParallel, ChunkedEqualsUnchunkedWhenScalesDoNotDependOnTheChunk) {
  for (const bool block : {false, true}) {
    const RandomProblem r = random_problem(37, 128, 64, 8, 2, 33, block ? std::optional(std::make_pair(64, 64))
                                                                        : std::nullopt);
    OracleOptions o;
    if (!block) o.a1_scale = 0.01f, o.a2_scale = 0.002f;
    Inputs in = inputs(r.p, o);
    const Tensor whole = run(in);
    in.options.chunk_size = 5;
    const Tensor chunked = run(in);
    EXPECT_EQ(std::memcmp(whole.data_ptr(), chunked.data_ptr(), whole.nbytes()), 0) << block;
  }
}

// With dynamic per-tensor scales each chunk has its own scales (spec 2.7): the result is that of
// calling fused_experts on every chunk separately, and the oracle with the same chunking.
TEST(FusedExpertsParallel, DynamicScalesArePerChunk) {
  const Problem p = grid_problem(20, 128, 32, 8, 2, 34);
  OracleOptions o;
  o.chunk_size = 8;
  Inputs in = inputs(p, o);
  const std::vector<double> got = values(run(in));
  EXPECT_EQ(mismatches(got, oracle(p, o), "oracle, chunk 8"), 0);
  std::vector<double> pieces;
  for (int64_t t0 = 0; t0 < p.m; t0 += 8) {
    const int64_t n = std::min<int64_t>(8, p.m - t0);
    Inputs part = in;
    part.x = in.x.narrow(0, t0, n).contiguous();
    part.weights = in.weights.narrow(0, t0, n).contiguous();
    part.ids = in.ids.narrow(0, t0, n).contiguous();
    part.options.chunk_size = 0;
    const std::vector<double> y = values(run(part));
    pieces.insert(pieces.end(), y.begin(), y.end());
  }
  EXPECT_EQ(mismatches(got, pieces, "chunk by chunk"), 0);
  in.options.chunk_size = 0;
  EXPECT_GT(count_differences(values(run(in)), got), 0) << "the per-chunk scales should matter here";
}

TEST(FusedExpertsParallel, ChunkSizeFromTheContext) {
  const Problem p = grid_problem(20, 128, 32, 8, 2, 35);
  OracleOptions o;
  o.chunk_size = 6;
  Inputs in = inputs(p, o);
  const Tensor explicit_chunks = run(in);
  in.options.chunk_size = 0;
  Overrides overrides;
  overrides.fused_moe_chunk_size = 6;
  const Tensor env_chunks = run(in, cpu_ctx_with(overrides));
  EXPECT_EQ(std::memcmp(explicit_chunks.data_ptr(), env_chunks.data_ptr(), env_chunks.nbytes()), 0);
  EXPECT_GT(count_differences(values(run(in)), values(env_chunks)), 0) << "the default chunk (32768) differs";
}

// fast_accum changes only the sm_90 tensor-core path: the CPU result is the same, from the option
// and from the context's override.
TEST(FusedExpertsParallel, FastAccumulationLeavesTheCpuPathAlone) {
  const Problem p = grid_problem(20, 128, 32, 8, 2, 37);
  Inputs in = inputs(p, OracleOptions{});
  const Tensor exact = run(in);
  in.options.fast_accum = true;
  const Tensor fast = run(in);
  EXPECT_EQ(std::memcmp(exact.data_ptr(), fast.data_ptr(), exact.nbytes()), 0);
  in.options.fast_accum = false;
  Overrides overrides;
  overrides.moe_fast_accum = true;
  const Tensor env_fast = run(in, cpu_ctx_with(overrides));
  EXPECT_EQ(std::memcmp(exact.data_ptr(), env_fast.data_ptr(), exact.nbytes()), 0);
}

TEST(FusedExpertsParallel, InPlaceWritesHiddenStates) {
  const RandomProblem r = random_problem(30, 128, 64, 8, 2, 36, std::make_pair(64, 64));
  Inputs in = inputs(r.p, OracleOptions{});
  const Tensor out_of_place = run(in);
  in.options.inplace = true;
  in.options.chunk_size = 7;  // later chunks must still read their original rows
  const Tensor y = run(in);
  EXPECT_EQ(y.data_ptr(), in.x.data_ptr());
  EXPECT_EQ(std::memcmp(y.data_ptr(), out_of_place.data_ptr(), y.nbytes()), 0);
}

}  // namespace
}  // namespace fp8kit
