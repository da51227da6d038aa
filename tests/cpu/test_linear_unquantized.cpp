// UnquantizedLinearMethod (no quantization config, or an ignored layer): the [N, K] weight in the
// model dtype, forward = ops::matmul_16bit with the bias, leading dimensions kept, and the
// dtype check.
#include <gtest/gtest.h>

#include "expect_error.h"
#include "test_context.h"
#include "fp8kit/layers/linear.h"
#include "fp8kit/layers/unquantized_linear_method.h"
#include "fp8kit/ops/gemm.h"
#include "test_linear_util.h"

namespace fp8kit {
namespace {

using linear_test::random_16bit;
using linear_test::same_bits;
using testing::expect_invalid;

LinearOptions bf16_options(bool bias) {
  LinearOptions o;
  o.bias = bias;
  return o;
}

TEST(UnquantizedLinear, CreatesTheModelDtypeWeight) {
  MergedColumnParallelLinear l("gate_up_proj", 64, {96, 96}, bf16_options(false));
  const Parameter& w = l.parameter("weight");
  EXPECT_EQ(w.kind, ParameterKind::kModelWeight);
  EXPECT_EQ(w.data.dtype(), DType::kBF16);
  EXPECT_EQ(w.data.shape(), (Shape{192, 64}));
  EXPECT_EQ(w.output_dim, 0);
  EXPECT_EQ(w.input_dim, 1);
  EXPECT_EQ(l.parameters().size(), 1u);
  l.process_weights_after_loading(cpu_ctx());  // nothing to do
  EXPECT_EQ(l.parameter("weight").data.shape(), (Shape{192, 64}));
}

TEST(UnquantizedLinear, ForwardIsMatmul16WithBias) {
  std::mt19937 rng(41);
  const Tensor w = random_16bit({40, 24}, DType::kBF16, rng), b = random_16bit({40}, DType::kBF16, rng);
  ColumnParallelLinear l("c", 24, 40, bf16_options(true));
  l.load_weight("weight", w, std::nullopt);
  l.load_weight("bias", b, std::nullopt);
  l.process_weights_after_loading(cpu_ctx());
  const Tensor x = random_16bit({2, 3, 24}, DType::kBF16, rng);
  const Tensor y = l.forward(cpu_ctx(), x);
  EXPECT_EQ(y.shape(), (Shape{2, 3, 40}));
  EXPECT_TRUE(same_bits(y.view({6, 40}), ops::matmul_16bit(cpu_ctx(), x.view({6, 24}), w, b)));
  const Tensor x1 = random_16bit({24}, DType::kBF16, rng);  // one token without a batch dimension
  EXPECT_EQ(l.forward(cpu_ctx(), x1).shape(), (Shape{40}));
}

TEST(UnquantizedLinear, InputDtypeMustMatch) {
  ReplicatedLinear l("lm_head", 8, 4, bf16_options(false));
  expect_invalid([&] { l.forward(cpu_ctx(), Tensor::zeros({1, 8}, DType::kBF16)); },
                 "lm_head: process_weights_after_loading must run before the forward pass");
  l.process_weights_after_loading(cpu_ctx());
  expect_invalid([&] { l.forward(cpu_ctx(), Tensor::zeros({1, 8}, DType::kF16)); },
                 "lm_head: the input is f16, the layer's weights are bf16");
}

}  // namespace
}  // namespace fp8kit
