// Layer (include/fp8kit/layers/layer.h): the parameter registry (duplicate names are an internal
// error, as vLLM's set_weight_attrs), lookups and removal, and the plain weight loader: same
// shapes, one-element values, dtype widening, read-only mapped sources, and errors that name the
// layer, the parameter and both shapes.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdio>

#include "expect_error.h"
#include "fp8kit/layers/layer.h"
#include "test_linear_util.h"

namespace fp8kit {
namespace {

using linear_test::values;
using testing::expect_error;
using testing::expect_invalid;

Parameter plain(const std::string& name, const Shape& shape, DType dtype = DType::kF32) {
  Parameter p;
  p.name = name;
  p.data = Tensor::zeros(shape, dtype);
  return p;
}

TEST(LayerParameters, RegisterFindRemove) {
  Layer layer("model.layers.0.self_attn.attn");
  EXPECT_EQ(layer.prefix(), "model.layers.0.self_attn.attn");
  EXPECT_TRUE(layer.device().is_cpu());
  Parameter& k = layer.register_parameter(plain("k_scale", {}));
  EXPECT_EQ(&k, &layer.parameter("k_scale"));
  EXPECT_EQ(layer.find_parameter("v_scale"), nullptr);
  EXPECT_NE(layer.find_parameter("k_scale"), nullptr);
  EXPECT_EQ(layer.parameters().size(), 1u);
  layer.remove_parameter("k_scale");
  layer.remove_parameter("absent");  // del of a missing attribute is a no-op here
  EXPECT_EQ(layer.find_parameter("k_scale"), nullptr);
  EXPECT_EQ(layer.quant_method(), nullptr);
}

TEST(LayerParameters, DuplicateNameIsInternalError) {
  Layer layer("lm_head");
  layer.register_parameter(plain("weight", {2, 2}));
  expect_error([&] { layer.register_parameter(plain("weight", {3})); }, ErrorCode::kInternal,
               "Overwriting existing tensor attribute: weight");
  EXPECT_EQ(layer.parameter("weight").data.shape(), (Shape{2, 2}));  // the first one stays
}

TEST(LayerParameters, MissingParameterNamesLayer) {
  Layer layer("model.norm");
  expect_invalid([&] { layer.parameter("weight"); }, "model.norm: the layer has no parameter 'weight'");
  expect_invalid([&] { layer.load_weight("weight", Tensor::scalar_f32(1), std::nullopt); },
                 "model.norm: the layer has no parameter 'weight'");
}

TEST(LayerParameters, KindAndShardNames) {
  EXPECT_STREQ(parameter_kind_name(ParameterKind::kPerTensorScale), "PerTensorScaleParameter");
  EXPECT_STREQ(parameter_kind_name(ParameterKind::kBlockScale), "BlockQuantScaleParameter");
  EXPECT_EQ(shard_id_string(std::nullopt), "all");
  EXPECT_EQ(shard_id_string(ShardId{int64_t(1)}), "1");
  EXPECT_EQ(shard_id_string(ShardId{std::string("k")}), "k");
}

TEST(LayerLoad, SameShapeAndRecordsShard) {
  Layer layer("m");
  layer.register_parameter(plain("w", {2, 3}));
  layer.load_weight("w", linear_test::tagged(2, 3, 1), std::nullopt);
  const Parameter& p = layer.parameter("w");
  EXPECT_EQ(values(p.data), (std::vector<float>{1000000, 1000001, 1000002, 1001000, 1001001, 1001002}));
  EXPECT_EQ(p.loaded_shards, (std::set<std::string>{"all"}));
}

TEST(LayerLoad, OneElementValues) {
  // The spec's _assert_and_load accepts a 0-dim value for a [1] parameter; default_weight_loader
  // fills a scalar parameter from any one-element value.
  Layer layer("m");
  layer.register_parameter(plain("one", {1}));
  layer.register_parameter(plain("scalar", {}));
  layer.load_weight("one", Tensor::scalar_f32(0.25f), std::nullopt);
  layer.load_weight("scalar", linear_test::f32_vector({0.5f}), std::nullopt);
  EXPECT_EQ(values(layer.parameter("one").data), (std::vector<float>{0.25f}));
  EXPECT_EQ(layer.parameter("scalar").data.dim(), 0);
  EXPECT_EQ(layer.parameter("scalar").data.item_f32(), 0.5f);
}

TEST(LayerLoad, ShapeMismatchNamesEverything) {
  Layer layer("model.layers.3.mlp.down_proj");
  layer.register_parameter(plain("weight", {4, 8}));
  expect_invalid([&] { layer.load_weight("weight", Tensor::zeros({4, 7}, DType::kF32), std::nullopt); },
                 "model.layers.3.mlp.down_proj.weight: expected a checkpoint tensor of shape [4, 8], got [4, 7]");
  layer.register_parameter(plain("s", {2}));
  expect_invalid([&] { layer.load_weight("s", Tensor::scalar_f32(1), std::nullopt); },
                 "model.layers.3.mlp.down_proj.s: expected a checkpoint tensor of shape [2], got []");
}

TEST(LayerLoad, ShardsAreRefused) {
  Layer layer("attn");
  layer.register_parameter(plain("k_scale", {}));
  expect_invalid([&] { layer.load_weight("k_scale", Tensor::scalar_f32(1), ShardId{std::string("k")}); },
                 "attn.k_scale (shard k): this layer has no shards");
}

TEST(LayerLoad, Bf16AndF16ValuesWidenToF32) {
  Layer layer("m");
  layer.register_parameter(plain("s", {3}));
  Tensor bf = Tensor::empty({3}, DType::kBF16);
  bf.data<BFloat16>()[0] = float_to_bf16(0.0078125f);
  bf.data<BFloat16>()[1] = float_to_bf16(-3.5f);
  bf.data<BFloat16>()[2] = float_to_bf16(1e-3f);
  layer.load_weight("s", bf, std::nullopt);
  EXPECT_EQ(values(layer.parameter("s").data), (std::vector<float>{0.0078125f, -3.5f, bf16_to_float(float_to_bf16(1e-3f))}));
  Tensor h = Tensor::empty({3}, DType::kF16);
  for (int i = 0; i < 3; ++i) h.data<Float16>()[i] = float_to_f16(float(i) + 0.5f);
  layer.load_weight("s", h, std::nullopt);
  EXPECT_EQ(values(layer.parameter("s").data), (std::vector<float>{0.5f, 1.5f, 2.5f}));
}

TEST(LayerLoad, NarrowingToBf16RoundsAndFp8IsNotAFloatTarget) {
  Layer layer("m");
  layer.register_parameter(plain("w", {2}, DType::kBF16));
  layer.load_weight("w", linear_test::f32_vector({1.00390625f, 3.0f}), std::nullopt);  // 1 + 2^-8: a tie, to even
  EXPECT_EQ(layer.parameter("w").data.data<BFloat16>()[0].bits, float_to_bf16(1.0f).bits);
  layer.register_parameter(plain("q", {2}, DType::kE4M3FN));
  expect_invalid([&] { layer.load_weight("q", linear_test::f32_vector({1, 2}), std::nullopt); },
                 "m.q: cannot load a checkpoint tensor of dtype f32 into a parameter of dtype e4m3fn");
}

TEST(LayerLoad, ReadOnlyMappedSource) {
  // Checkpoint tensors are views of read-only mappings; loading only reads them.
  void* page = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(page, MAP_FAILED);
  const float vals[4] = {1, 2, 3, 4};
  std::memcpy(page, vals, sizeof(vals));
  ASSERT_EQ(::mprotect(page, 4096, PROT_READ), 0);
  {
    const Tensor mapped = Tensor::from_blob(page, {2, 2}, DType::kF32);
    Layer layer("m");
    layer.register_parameter(plain("w", {2, 2}));
    layer.register_parameter(plain("col", {2}, DType::kBF16));
    layer.load_weight("w", mapped, std::nullopt);
    layer.load_weight("col", mapped.t().select(0, 1), std::nullopt);  // strided, converted
    EXPECT_EQ(values(layer.parameter("w").data), (std::vector<float>{1, 2, 3, 4}));
    EXPECT_EQ(bf16_to_float(layer.parameter("col").data.data<BFloat16>()[1]), 4.0f);
  }
  ::munmap(page, 4096);
}

}  // namespace
}  // namespace fp8kit
