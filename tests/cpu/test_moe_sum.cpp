// moe_sum on the CPU (src/ops/moe/moe_sum*.cpp): the two reduction rules of the spec made
// visible in crafted bf16/f16 cases (top_k 2..4 round after every add; other top_k round once),
// f32, and the errors.
#include <gtest/gtest.h>

#include "expect_error.h"
#include "test_context.h"
#include "fp8kit/half.h"
#include "fp8kit/ops/moe_experts.h"

namespace fp8kit {
namespace {

using testing::expect_invalid;

// [1, top_k, 1] bf16 with the given values.
Tensor bf16_slots(const std::vector<float>& v) {
  Tensor t = Tensor::empty({1, int64_t(v.size()), 1}, DType::kBF16);
  for (size_t i = 0; i < v.size(); ++i) t.data<BFloat16>()[i] = float_to_bf16(v[i]);
  return t;
}

float sum_bf16(const std::vector<float>& v) {
  Tensor out = Tensor::empty({1, 1}, DType::kBF16);
  ops::moe_sum(cpu_ctx(), bf16_slots(v), out);
  return bf16_to_float(out.data<BFloat16>()[0]);
}

TEST(MoeSum, SequentialBf16RoundingForTopk2To4) {
  const float h = 1.0f / 256;  // half a bf16 ulp of 1: 1 + h is a tie that rounds to even (1)
  EXPECT_EQ(sum_bf16({1, h}), 1.0f);
  EXPECT_EQ(sum_bf16({1, h, h}), 1.0f);        // each add rounds back to 1
  EXPECT_EQ(sum_bf16({1, h, h, 0}), 1.0f);
  EXPECT_EQ(sum_bf16({h, h, 1}), 1.0078125f);  // order matters: h + h = 2h first, then 1 + 2h is exact
}

TEST(MoeSum, OtherTopkAccumulatesInF32AndRoundsOnce) {
  const float h = 1.0f / 256;
  EXPECT_EQ(sum_bf16({1, h, h, 0, 0}), 1.0078125f);  // 1 + 2h, exact in bf16
  EXPECT_EQ(sum_bf16({1, h, h, 0, 0, 0, 0, 0}), 1.0078125f);
  EXPECT_EQ(sum_bf16({1.5f}), 1.5f);  // top_k 1: a copy
}

TEST(MoeSum, F16AndF32) {
  Tensor in = Tensor::empty({1, 3, 1}, DType::kF16);
  const float h = 1.0f / 2048;  // half an f16 ulp of 1
  for (int i = 0; i < 3; ++i) in.data<Float16>()[i] = float_to_f16(i == 0 ? 1.0f : h);
  Tensor out = Tensor::empty({1, 1}, DType::kF16);
  ops::moe_sum(cpu_ctx(), in, out);
  EXPECT_EQ(f16_to_float(out.data<Float16>()[0]), 1.0f);

  // f32, [2, 2, 3]: plain sums.
  const Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3, 10, 20, 30, -1, -2, -3, 0.5f, 0.25f, 0.125f}, {2, 2, 3});
  Tensor y = Tensor::empty({2, 3}, DType::kF32);
  ops::moe_sum(cpu_ctx(), x, y);
  const std::vector<float> want = {11, 22, 33, -0.5f, -1.75f, -2.875f};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(y.data<float>()[i], want[i]) << i;
}

TEST(MoeSum, Errors) {
  Tensor out = Tensor::empty({2, 4}, DType::kBF16);
  expect_invalid([&] { ops::moe_sum(cpu_ctx(), Tensor::zeros({2, 4}, DType::kBF16), out); },
                 "moe_sum: `input` must be 3-D, got bf16[2, 4] on cpu");
  expect_invalid([&] { ops::moe_sum(cpu_ctx(), Tensor::zeros({2, 2, 5}, DType::kBF16), out); },
                 "moe_sum: `out` must have shape [2, 5], got bf16[2, 4] on cpu");
  expect_invalid([&] { ops::moe_sum(cpu_ctx(), Tensor::zeros({2, 2, 4}, DType::kF16), out); },
                 "moe_sum: `out` must be f16, got bf16[2, 4] on cpu");
  expect_invalid([&] { ops::moe_sum(cpu_ctx(), Tensor::zeros({2, 4, 2}, DType::kBF16).transpose(1, 2), out); },
                 "moe_sum: `input` must be contiguous, got strides [8, 1, 2]");
}

}  // namespace
}  // namespace fp8kit
