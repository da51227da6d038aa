// silu_and_mul / gelu_and_mul on the CPU (src/ops/activation/): hand-computed values with the
// spec's double rounding (act rounded to T, then the product), f32 and f16, layouts, errors.
#include <gtest/gtest.h>

#include <cmath>

#include "expect_error.h"
#include "test_context.h"
#include "fp8kit/half.h"
#include "fp8kit/ops/moe_experts.h"

namespace fp8kit {
namespace {

using testing::expect_invalid;

Tensor bf16_rows(const std::vector<float>& v, int64_t rows, int64_t cols) {
  Tensor t = Tensor::empty({rows, cols}, DType::kBF16);
  for (size_t i = 0; i < v.size(); ++i) t.data<BFloat16>()[i] = float_to_bf16(v[i]);
  return t;
}

float bf(const Tensor& t, int64_t i) { return bf16_to_float(t.data<BFloat16>()[i]); }

// Values worked out by hand (f32 activation, then bf16 rounding of the activation and of the
// product). The last column of each row is a case where rounding once would differ.
TEST(MoeActivation, SiluHandComputedBf16) {
  // gate | up: silu(1) = 0.7310586 -> 0.73046875; * 2 = 1.4609375
  //            silu(-1) = -0.26894143 -> -0.26953125; * 3 = -0.80859375
  //            silu(0.75) = 0.50938404 -> 0.5078125; * 3 = 1.5234375 (one rounding: 1.53125)
  //            silu(1.5) = 1.2263616 -> 1.2265625; * 3 = 3.6796875 -> 3.6875 (one rounding: 3.671875)
  const Tensor x = bf16_rows({1, -1, 0.75f, 1.5f, 2, 3, 3, 3}, 1, 8);
  const Tensor y = ops::silu_and_mul(cpu_ctx(), x);
  ASSERT_EQ(y.shape(), (Shape{1, 4}));
  EXPECT_EQ(bf(y, 0), 1.4609375f);
  EXPECT_EQ(bf(y, 1), -0.80859375f);
  EXPECT_EQ(bf(y, 2), 1.5234375f);
  EXPECT_EQ(bf(y, 3), 3.6875f);
}

TEST(MoeActivation, GeluHandComputedBf16) {
  // gelu(1) = 0.84134471 -> 0.83984375; * 2 = 1.6796875
  // gelu(-1) = -0.15865526 -> -0.158203125; * 3 = -0.474609375 (one rounding: -0.4765625)
  // gelu(0.5) = 0.34573123 -> 0.345703125; * 1
  // gelu(2) = 1.9544997 -> 1.953125; * -1.5 = -2.9296875 -> -2.9375
  const Tensor x = bf16_rows({1, -1, 0.5f, 2, 2, 3, 1, -1.5f}, 1, 8);
  const Tensor y = ops::gelu_and_mul(cpu_ctx(), x);
  EXPECT_EQ(bf(y, 0), 1.6796875f);
  EXPECT_EQ(bf(y, 1), -0.474609375f);
  EXPECT_EQ(bf(y, 2), 0.345703125f);
  EXPECT_EQ(bf(y, 3), -2.9375f);
}

TEST(MoeActivation, F32IsTheFormulaWithoutRounding) {
  const std::vector<float> gate = {0.75f, -3.0f, 20.0f, -100.0f}, up = {3, 0.5f, 2, 7};
  std::vector<float> v = gate;
  v.insert(v.end(), up.begin(), up.end());
  const Tensor x = Tensor::from_vector(v, {1, 8});
  const Tensor s = ops::silu_and_mul(cpu_ctx(), x), g = ops::gelu_and_mul(cpu_ctx(), x);
  for (int i = 0; i < 4; ++i) {
    const float f = gate[size_t(i)];
    EXPECT_EQ(s.data<float>()[i], (f / (1.0f + std::exp(-f))) * up[size_t(i)]) << i;
    EXPECT_EQ(g.data<float>()[i], (f * 0.5f * (1.0f + std::erf(f * float(M_SQRT1_2)))) * up[size_t(i)]) << i;
  }
  // Far from zero both are the identity or zero: exact.
  EXPECT_EQ(s.data<float>()[2], 40.0f);
  EXPECT_EQ(g.data<float>()[3], -0.0f);
}

TEST(MoeActivation, F16RoundsTwice) {
  Tensor x = Tensor::empty({1, 2}, DType::kF16);
  x.data<Float16>()[0] = float_to_f16(1.0f);
  x.data<Float16>()[1] = float_to_f16(3.0f);
  const Tensor y = ops::silu_and_mul(cpu_ctx(), x);
  const float act = f16_to_float(float_to_f16(1.0f / (1.0f + std::exp(-1.0f))));
  EXPECT_EQ(f16_to_float(y.data<Float16>()[0]), f16_to_float(float_to_f16(act * 3.0f)));
}

TEST(MoeActivation, LayoutsAndPreallocatedOutput) {
  // [2, 3, 2d] with rows of a wider buffer (row stride 10): the same values as the packed copy.
  Tensor wide = Tensor::empty({2, 3, 10}, DType::kBF16);
  for (int64_t i = 0; i < wide.numel(); ++i) wide.data<BFloat16>()[i] = float_to_bf16(float(i % 7) - 3.0f);
  const Tensor x = wide.narrow(2, 1, 8);
  const Tensor packed = x.contiguous();
  Tensor out = Tensor::empty({2, 3, 4}, DType::kBF16);
  const Tensor y = ops::silu_and_mul(cpu_ctx(), x, out);
  EXPECT_EQ(y.data_ptr(), out.data_ptr());
  const Tensor z = ops::silu_and_mul(cpu_ctx(), packed);
  EXPECT_EQ(std::memcmp(y.data_ptr(), z.data_ptr(), y.nbytes()), 0);
}

TEST(MoeActivation, Errors) {
  expect_invalid([] { ops::silu_and_mul(cpu_ctx(), Tensor::zeros({2, 3}, DType::kBF16)); },
                 "silu_and_mul: the last dimension of `x` must be even ([..., 2d]), got bf16[2, 3] on cpu");
  expect_invalid([] { ops::gelu_and_mul(cpu_ctx(), Tensor::zeros({2, 4}, DType::kI32)); },
                 "gelu_and_mul: `x` must be f32, f16 or bf16, got i32[2, 4] on cpu");
  expect_invalid([] { ops::silu_and_mul(cpu_ctx(), Tensor::zeros({2, 4}, DType::kBF16), Tensor::zeros({2, 4}, DType::kBF16)); },
                 "silu_and_mul: `out` must have shape [2, 2], got bf16[2, 4] on cpu");
}

}  // namespace
}  // namespace fp8kit
