// Greedy sampling on CUDA (src/ops/sampling/sampling_cuda.cu) against the CPU reference on the
// same logits: the ids and ranks equal, the logprobs equal or one f32 ulp apart (the double sum in
// another order), over dtypes, vocabulary sizes (1 to 128256), tied maxima and -inf logits; the
// host's errors for NaN, +inf and all -inf rows; kUnsupported for rows that sample. Then the CUDA
// engine sampling greedy rows on the device against the same engine sampling them on the host.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "fp8kit/ops/sampling.h"
#include "gpu_test_util.h"
#include "runner_test_util.h"
#include "test_dirs.h"

namespace fp8kit {
namespace {

using namespace gpu_test;

std::vector<ops::SamplingParams> greedy_rows(int64_t n) {
  ops::SamplingParams p;
  p.temperature = 0.0f;
  return std::vector<ops::SamplingParams>(static_cast<size_t>(n), p);
}

int64_t ulps(float a, float b) {
  int32_t x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  return std::llabs(int64_t(x) - int64_t(y));
}

TEST(SamplingCuda, GreedyMatchesTheReference) {
  int64_t cases = 0, exact = 0;
  for (DType dtype : {DType::kBF16, DType::kF16, DType::kF32}) {
    for (int64_t vocab : {1, 7, 1000, 32000, 128256}) {
      for (int64_t rows : {1, 3, 33}) {
        const uint32_t seed = next_seed();
        Tensor x = random_tensor({rows, vocab}, dtype, seed, 3.0f);
        // Row 1: a tie of the maximum at two ids; row 2: -inf at every even id (the odd ones finite).
        if (rows > 1 && vocab > 5) {
          store_float(x, vocab + 2, 40.0f);
          store_float(x, vocab + 5, 40.0f);
        }
        if (rows > 2 && vocab > 1) {  // (a row of one -inf logit is an error: BadLogits)
          for (int64_t v = 0; v < vocab; v += 2) store_float(x, 2 * vocab + v, -INFINITY);
        }
        const std::string name = std::string(dtype_name(dtype)) + " [" + std::to_string(rows) + ", " +
                                 std::to_string(vocab) + "]";
        ops::SamplingResult want, got;
        try {  // an error names the case (and the run goes on)
          want = ops::sample(ctx_of(x), x, greedy_rows(rows));
          got = ops::sample(cuda_ctx(), x.to(Device::cuda(0)), greedy_rows(rows));
        } catch (const std::exception& e) {
          ADD_FAILURE() << name << ": " << e.what();
          continue;
        }
        const Tensor ids = to_host(got.token_ids), lp = to_host(got.logprobs), ranks = to_host(got.ranks);
        for (int64_t r = 0; r < rows; ++r) {
          SCOPED_TRACE(name + " row " + std::to_string(r));
          EXPECT_EQ(ids.data<int64_t>()[r], want.token_ids.data<int64_t>()[r]);
          EXPECT_EQ(ranks.data<int64_t>()[r], want.ranks.data<int64_t>()[r]);
          const float g = lp.data<float>()[r], w = want.logprobs.data<float>()[r];
          EXPECT_LE(ulps(g, w), 1) << g << " against " << w;
          ++cases;
          exact += g == w ? 1 : 0;
        }
      }
    }
  }
  std::printf("greedy sampling on CUDA: %lld rows, %lld logprobs bit-exact\n", static_cast<long long>(cases),
              static_cast<long long>(exact));
}

TEST(SamplingCuda, BadLogitsRaiseTheHostErrors) {
  const auto message = [](const Tensor& x) {
    try {
      ops::sample(cuda_ctx(), x.to(Device::cuda(0)), greedy_rows(x.size(0)));
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  Tensor x = Tensor::zeros({3, 50}, DType::kF32);
  store_float(x, 50 + 9, NAN);
  store_float(x, 50 + 4, INFINITY);
  EXPECT_NE(message(x).find("logits[1, 4] is +inf"), std::string::npos) << message(x);
  store_float(x, 50 + 2, NAN);
  EXPECT_NE(message(x).find("logits[1, 2] is NaN"), std::string::npos) << message(x);
  Tensor y = Tensor::zeros({2, 50}, DType::kF32);
  for (int64_t v = 0; v < 50; ++v) store_float(y, 50 + v, -INFINITY);
  EXPECT_NE(message(y).find("every logit of row 1 is -inf"), std::string::npos) << message(y);

  ops::SamplingParams hot;
  hot.temperature = 0.7f;
  try {
    ops::sample(cuda_ctx(), Tensor::zeros({1, 8}, DType::kF32, Device::cuda(0)), {hot});
    ADD_FAILURE() << "a sampling row on CUDA";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
  }
}

// Greedy requests without returned logits sample on the device; with them, on the host: the same
// tokens and logprobs (within an ulp).
TEST(SamplingCuda, EngineSamplesGreedyRowsOnTheDevice) {
  convert::SyntheticModelSpec spec;
  spec.moe_layers = {};
  const std::string model = runner_test::write_model(testing::scratch_dir() + "/sampling-engine", spec);
  std::vector<std::vector<int32_t>> tokens[2];
  std::vector<std::vector<float>> logprobs[2];
  for (int on_host = 0; on_host < 2; ++on_host) {
    EngineOptions o;
    o.load.device = Device::cuda(0);
    Engine engine(model, o);
    for (int r = 0; r < 3; ++r) engine.add_request(runner_test::ids(5 + 4 * r, 1024, uint32_t(r)), runner_test::greedy(6, on_host == 1));
    tokens[on_host].resize(3);
    logprobs[on_host].resize(3);
    const ForwardContext ctx(Device::cuda(0));
    while (engine.has_unfinished_requests()) {
      for (const RequestOutput& out : engine.step(ctx).outputs) {
        auto& t = tokens[on_host][size_t(out.request_id)];
        t.insert(t.end(), out.new_token_ids.begin(), out.new_token_ids.end());
        auto& l = logprobs[on_host][size_t(out.request_id)];
        l.insert(l.end(), out.logprobs.begin(), out.logprobs.end());
      }
    }
  }
  for (size_t r = 0; r < 3; ++r) {
    EXPECT_EQ(tokens[0][r], tokens[1][r]) << "request " << r;
    ASSERT_EQ(logprobs[0][r].size(), logprobs[1][r].size());
    for (size_t i = 0; i < logprobs[0][r].size(); ++i) EXPECT_LE(ulps(logprobs[0][r][i], logprobs[1][r][i]), 1);
  }
}

}  // namespace
}  // namespace fp8kit
