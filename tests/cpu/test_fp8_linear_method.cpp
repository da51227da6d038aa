// Fp8LinearMethod::create_weights (spec 1.2): parameter shapes, dtypes, kinds and not-loaded
// sentinels for every scheme, the layer attributes it sets, and the block-shape errors with
// the spec's texts and conditions (merged layers at TP = 1 included).
#include <gtest/gtest.h>

#include <cfloat>

#include "expect_error.h"
#include "fp8kit/layers/fp8_config.h"
#include "fp8kit/layers/fp8_linear_method.h"
#include "fp8kit/layers/linear.h"
#include "test_linear_util.h"

namespace fp8kit {
namespace {

using linear_test::values;
using testing::expect_invalid;

using linear_test::kNot;

LinearOptions fp8_parallel_options(const Fp8Config& config, int rank = 0, int size = 1, DType dtype = DType::kBF16) {
  LinearOptions o;
  o.quant_config = &config;
  o.parallel = {rank, size};
  o.params_dtype = dtype;
  return o;
}

Fp8LinearMethod& method_of(LinearBase& layer) { return dynamic_cast<Fp8LinearMethod&>(layer.linear_method()); }

TEST(Fp8LinearMethodCreate, SerializedPerTensorStatic) {
  const Fp8Config config(true, "static");
  QKVParallelLinear l("qkv_proj", 64, 16, 4, 2, fp8_parallel_options(config, 0, 1, DType::kF16));
  EXPECT_EQ(l.quant_method()->name(), "Fp8LinearMethod");
  EXPECT_FALSE(method_of(l).block_quant());
  EXPECT_FALSE(method_of(l).weight_only());
  const Parameter& w = l.parameter("weight");
  EXPECT_EQ(w.kind, ParameterKind::kModelWeight);
  EXPECT_EQ(w.data.dtype(), DType::kE4M3FN);
  EXPECT_EQ(w.data.shape(), (Shape{128, 64}));
  EXPECT_EQ(w.output_dim, 0);
  EXPECT_EQ(w.input_dim, 1);
  for (const char* name : {"weight_scale", "input_scale"}) {
    const Parameter& s = l.parameter(name);
    EXPECT_EQ(s.kind, ParameterKind::kPerTensorScale);
    EXPECT_EQ(s.data.dtype(), DType::kF32);
    EXPECT_EQ(values(s.data), (std::vector<float>{kNot, kNot, kNot}));  // torch.finfo(float32).min
  }
  EXPECT_EQ(l.logical_widths, (std::vector<int64_t>{64, 32, 32}));
  EXPECT_EQ(l.orig_dtype, DType::kF16);
  EXPECT_FALSE(l.weight_block_size.has_value());
  EXPECT_EQ(l.find_parameter("weight_scale_inv"), nullptr);
}

TEST(Fp8LinearMethodCreate, SerializedDynamicHasNoInputScale) {
  const Fp8Config config(true, "dynamic");
  RowParallelLinear l("o_proj", 64, 32, fp8_parallel_options(config));
  EXPECT_EQ(values(l.parameter("weight_scale").data), (std::vector<float>{kNot}));
  EXPECT_EQ(l.find_parameter("input_scale"), nullptr);
}

TEST(Fp8LinearMethodCreate, BlockScales) {
  const Fp8Config config(true, "dynamic", {}, std::vector<int64_t>{128, 128});
  MergedColumnParallelLinear l("gate_up_proj", 320, {384, 384}, fp8_parallel_options(config, 1, 3));
  EXPECT_TRUE(method_of(l).block_quant());
  const Parameter& s = l.parameter("weight_scale_inv");
  EXPECT_EQ(s.kind, ParameterKind::kBlockScale);
  EXPECT_EQ(s.data.shape(), (Shape{2, 3}));  // ceil(256 / 128), ceil(320 / 128)
  EXPECT_EQ(values(s.data), std::vector<float>(6, kNot));
  EXPECT_EQ(s.output_dim, 0);
  EXPECT_EQ(s.input_dim, 1);
  EXPECT_EQ(l.find_parameter("weight_scale"), nullptr);
  EXPECT_EQ(l.find_parameter("input_scale"), nullptr);
  EXPECT_EQ(l.weight_block_size, (std::optional<std::vector<int64_t>>{{128, 128}}));
  // A single partition at TP = 1 may end in a partial block.
  const Fp8Config small(true, "dynamic", {}, std::vector<int64_t>{4, 4});
  ColumnParallelLinear ragged("c", 10, 10, fp8_parallel_options(small));
  EXPECT_EQ(ragged.parameter("weight_scale_inv").data.shape(), (Shape{3, 3}));
}

TEST(Fp8LinearMethodCreate, OnlineKeepsTheModelDtype) {
  for (const char* scheme : {"dynamic", "static"}) {
    // Not serialized: no scales; a static scheme creates no input_scale either (the linear method
    // quantizes activations dynamically; the spec's error for it is the MoE method's).
    const Fp8Config config(false, scheme);
    ColumnParallelLinear l("c", 64, 32, fp8_parallel_options(config));
    EXPECT_EQ(l.parameter("weight").data.dtype(), DType::kBF16);
    EXPECT_EQ(l.parameter("weight").data.shape(), (Shape{32, 64}));
    EXPECT_EQ(l.parameters().size(), 1u);
  }
}

TEST(Fp8LinearMethodCreate, BlockShapeErrors) {
  const Fp8Config config(true, "dynamic", {}, std::vector<int64_t>{128, 128});
  expect_invalid([&] { RowParallelLinear("down_proj", 384, 128, fp8_parallel_options(config, 0, 2)); },
                 "Weight input_size_per_partition = 192 is not divisible by weight quantization block_k = 128.");
  expect_invalid([&] { ColumnParallelLinear("c", 128, 384, fp8_parallel_options(config, 1, 2)); },
                 "Weight output_partition_size = 192 is not divisible by weight quantization block_n = 128.");
  // Merged layers are checked at TP = 1 too, each partition on its own.
  expect_invalid([&] { MergedColumnParallelLinear("gate_up_proj", 128, {128, 192}, fp8_parallel_options(config)); },
                 "Weight output_partition_size = 192 is not divisible by weight quantization block_n = 128.");
  expect_invalid([&] { QKVParallelLinear("qkv_proj", 128, 64, 4, 1, fp8_parallel_options(config)); },
                 "Weight output_partition_size = 64 is not divisible by weight quantization block_n = 128.");
  // The conditions: unfused layers at TP = 1 and replicated layers at any TP are not checked.
  EXPECT_NO_THROW(ColumnParallelLinear("c", 200, 200, fp8_parallel_options(config)));
  EXPECT_NO_THROW(RowParallelLinear("r", 200, 200, fp8_parallel_options(config)));
  EXPECT_NO_THROW(ReplicatedLinear("gate", 200, 60, fp8_parallel_options(config, 1, 2)));
}

TEST(Fp8LinearMethodCreate, IgnoredLayerIsUnquantized) {
  const Fp8Config config(true, "static", {"lm_head"});
  ReplicatedLinear l("lm_head", 64, 100, fp8_parallel_options(config));
  EXPECT_EQ(l.quant_method()->name(), "UnquantizedLinearMethod");
  EXPECT_EQ(l.parameter("weight").data.dtype(), DType::kBF16);
}

TEST(Fp8LinearMethodCreate, ForcedWeightOnlyIsDecidedAtCreate) {
  const Fp8Config config(true, "static");
  {
    ColumnParallelLinear l("c", 64, 32, with_forced_weight_only(fp8_parallel_options(config), true));
    EXPECT_TRUE(method_of(l).weight_only());
    EXPECT_TRUE(method_of(l).use_weight_only(l));
  }
  ColumnParallelLinear l("c", 64, 32, with_forced_weight_only(fp8_parallel_options(config), false));
  EXPECT_FALSE(method_of(l).weight_only());  // a CPU layer runs W8A8 on the reference
}

}  // namespace
}  // namespace fp8kit
