// Fp8MoEMethod::create_weights (include/fp8kit/layers/fp8_moe_method.h; spec 1.8): parameter names,
// shapes, dtypes and 1.0 defaults for per-tensor, block, static and online configs, and the spec's
// error texts. The post-processing and apply are in test_fp8_moe_method_process.cpp.
#include <gtest/gtest.h>

#include <vector>

#include "expect_error.h"
#include "test_context.h"
#include "fp8kit/layers/fp8_config.h"
#include "fp8kit/layers/fused_moe.h"

namespace fp8kit {
namespace {

using testing::expect_invalid;

FusedMoEOptions moe_options(const Fp8Config& config, int64_t hidden, int64_t inter, int tp_size = 1) {
  FusedMoEOptions o;
  o.num_experts = 3;
  o.top_k = 2;
  o.hidden_size = hidden;
  o.intermediate_size = inter;
  o.quant_config = &config;
  o.parallel = {0, tp_size};
  return o;
}

void expect_ones(const Tensor& t, const Shape& shape) {
  EXPECT_EQ(t.shape(), shape);
  EXPECT_EQ(t.dtype(), DType::kF32);
  for (int64_t i = 0; i < t.numel(); ++i) EXPECT_EQ(t.data<float>()[i], 1.0f) << i;
}

TEST(Fp8MoEMethodCreate, SerializedPerTensor) {
  Fp8Config config(true, "dynamic");
  FusedMoE layer("moe", moe_options(config, 16, 8));
  EXPECT_EQ(layer.parameter("w13_weight").data.shape(), (Shape{3, 16, 16}));
  EXPECT_EQ(layer.parameter("w13_weight").data.dtype(), DType::kE4M3FN);
  EXPECT_EQ(layer.parameter("w2_weight").data.shape(), (Shape{3, 16, 8}));
  EXPECT_EQ(layer.parameter("w2_weight").data.dtype(), DType::kE4M3FN);
  expect_ones(layer.parameter("w13_weight_scale").data, {3, 2});
  expect_ones(layer.parameter("w2_weight_scale").data, {3});
  EXPECT_EQ(layer.parameter("w13_weight_scale").kind, ParameterKind::kPerTensorScale);
  EXPECT_EQ(layer.find_parameter("w13_input_scale"), nullptr);  // dynamic: None
  EXPECT_EQ(layer.find_parameter("w13_weight_scale_inv"), nullptr);
  EXPECT_EQ(layer.orig_dtype, DType::kBF16);
  EXPECT_FALSE(layer.weight_block_size.has_value());
}

TEST(Fp8MoEMethodCreate, StaticInputScales) {
  Fp8Config config(true, "static");
  FusedMoE layer("moe", moe_options(config, 16, 8));
  expect_ones(layer.parameter("w13_input_scale").data, {3});
  expect_ones(layer.parameter("w2_input_scale").data, {3});
}

TEST(Fp8MoEMethodCreate, OnlineKeepsTheModelDtype) {
  Fp8Config config;  // a BF16 checkpoint quantized at load time
  FusedMoEOptions o = moe_options(config, 16, 8);
  o.params_dtype = DType::kF16;
  FusedMoE layer("moe", o);
  EXPECT_EQ(layer.parameter("w13_weight").data.dtype(), DType::kF16);
  EXPECT_EQ(layer.parameter("w2_weight").data.dtype(), DType::kF16);
  expect_ones(layer.parameter("w13_weight_scale").data, {3, 2});
  EXPECT_EQ(layer.orig_dtype, DType::kF16);
}

TEST(Fp8MoEMethodCreate, BlockScales) {
  Fp8Config config(true, "dynamic", {}, std::vector<int64_t>{8, 16});
  FusedMoE layer("moe", moe_options(config, 40, 24));  // H = 40: a partial last block of k
  EXPECT_EQ(layer.weight_block_size, (std::vector<int64_t>{8, 16}));
  expect_ones(layer.parameter("w13_weight_scale_inv").data, {3, 2 * 3, 3});
  expect_ones(layer.parameter("w2_weight_scale_inv").data, {3, 5, 2});
  EXPECT_EQ(layer.parameter("w2_weight_scale_inv").kind, ParameterKind::kBlockScale);
  EXPECT_EQ(layer.find_parameter("w13_weight_scale"), nullptr);
}

TEST(Fp8MoEMethodCreate, BlockErrors) {
  Fp8Config config(true, "dynamic", {}, std::vector<int64_t>{8, 16});
  // I % block_n is checked at every TP size (gate and up are merged).
  expect_invalid([&] { FusedMoE("moe", moe_options(config, 32, 12)); },
                 "The output_size of gate's and up's weight = 12 is not divisible by weight quantization block_n = 8.");
  // I % block_k only when down is split across ranks.
  EXPECT_NO_THROW(FusedMoE("moe", moe_options(config, 32, 24)));
  expect_invalid([&] { FusedMoE("moe", moe_options(config, 32, 48, 2)); },
                 "The input_size of down's weight = 24 is not divisible by weight quantization block_k = 16.");
  EXPECT_NO_THROW(FusedMoE("moe", moe_options(config, 32, 64, 2)));
}

TEST(Fp8MoEMethodCreate, StaticNeedsSerializedCheckpoint) {
  Fp8Config config(false, "static");
  expect_invalid([&] { FusedMoE("moe", moe_options(config, 16, 8)); },
                 "Found static activation scheme for checkpoint that was not serialized fp8.");
}

TEST(Fp8MoEMethodCreate, ApplyBeforeProcessing) {
  Fp8Config config(true, "dynamic");
  FusedMoE layer("moe", moe_options(config, 16, 8));
  expect_invalid([&] { layer.forward(cpu_ctx(), Tensor::zeros({2, 16}, DType::kBF16), Tensor::zeros({2, 3}, DType::kF32)); },
                 "moe: process_weights_after_loading must run before the forward pass");
  expect_invalid([&] { layer.forward(cpu_ctx(), Tensor::zeros({2, 16}, DType::kBF16), Tensor::zeros({2, 4}, DType::kF32)); },
                 "moe: router_logits must be [2, 3], got f32[2, 4] on cpu");
}

}  // namespace
}  // namespace fp8kit
