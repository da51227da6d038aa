// FusedMoE (include/fp8kit/layers/fused_moe.h): the constructor's invariants and error texts, the
// method it picks, the expert map, every case of the MoE weight loader (TP narrowing of w1/w3 rows
// and w2 columns, EP skipping, per-tensor scale slots, block scales in blocks, input scales, 3-D
// loads, the spec's error texts) and make_expert_params_mapping.
#include <gtest/gtest.h>

#include <vector>

#include "expect_error.h"
#include "fp8kit/half.h"
#include "fp8kit/layers/fp8_config.h"
#include "fp8kit/layers/fused_moe.h"

namespace fp8kit {
namespace {

using testing::expect_error;
using testing::expect_invalid;

FusedMoEOptions options(int64_t experts, int64_t hidden, int64_t inter, int tp_rank = 0, int tp_size = 1) {
  FusedMoEOptions o;
  o.num_experts = experts;
  o.top_k = 2;
  o.hidden_size = hidden;
  o.intermediate_size = inter;
  o.parallel = {tp_rank, tp_size};
  return o;
}

// f32 with value base + i: distinct per element, exact in bf16 while |base + i| <= 256.
Tensor arange(const Shape& shape, float base = 0.0f) {
  Tensor t = Tensor::empty(shape, DType::kF32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = base + float(i);
  return t;
}

float at(const Tensor& t, const std::vector<int64_t>& index) {
  Tensor v = t;
  for (int64_t i : index) v = v.select(0, i);
  return v.dtype() == DType::kBF16 ? bf16_to_float(v.data<BFloat16>()[0]) : v.data<float>()[0];
}

TEST(FusedMoE, SizesAndMethod) {
  FusedMoEOptions o = options(6, 8, 16, 1, 2);
  o.num_redundant_experts = 2;
  FusedMoE layer("model.layers.1.mlp.experts", o);
  EXPECT_EQ(layer.global_num_experts(), 8);
  EXPECT_EQ(layer.local_num_experts(), 8);
  EXPECT_FALSE(layer.expert_map().defined());
  EXPECT_EQ(layer.intermediate_size_per_partition(), 8);
  EXPECT_EQ(layer.quant_method()->name(), "UnquantizedFusedMoEMethod");
  EXPECT_EQ(layer.parameter("w13_weight").data.shape(), (Shape{8, 16, 8}));
  EXPECT_EQ(layer.parameter("w2_weight").data.shape(), (Shape{8, 8, 8}));
  EXPECT_EQ(layer.parameter("w2_weight").data.dtype(), DType::kBF16);

  Fp8Config fp8(true);
  o.quant_config = &fp8;
  o.num_redundant_experts = 0;
  o.ep_size = 4;
  o.ep_rank = 3;  // the last rank owns the remainder: experts 3, 4, 5
  FusedMoE ep("model.layers.1.mlp.experts", o);
  EXPECT_EQ(ep.quant_method()->name(), "Fp8MoEMethod");
  EXPECT_EQ(ep.local_num_experts(), 3);
  ASSERT_TRUE(ep.expert_map().defined());
  const std::vector<int32_t> want = {-1, -1, -1, 0, 1, 2};
  EXPECT_EQ(std::vector<int32_t>(ep.expert_map().data<int32_t>(), ep.expert_map().data<int32_t>() + 6), want);
  EXPECT_EQ(ep.parameter("w13_weight").data.shape(), (Shape{3, 16, 8}));
}

TEST(FusedMoE, ConstructorErrors) {
  FusedMoEOptions o = options(4, 8, 16);
  o.scoring_func = "sigmoid";
  expect_invalid([&] { FusedMoE("moe", o); }, "Only softmax scoring function is supported for non-grouped topk.");
  o = options(4, 8, 15, 0, 2);
  expect_invalid([&] { FusedMoE("moe", o); }, "moe: intermediate_size 15 is not divisible by tp_size 2");
  o = options(4, 8, 16);
  o.use_grouped_topk = true;
  o.num_expert_group = 2;
  expect_invalid([&] { FusedMoE("moe", o); }, "moe: use_grouped_topk needs num_expert_group and topk_group");
  o.topk_group = 1;
  o.scoring_func = "sigmoid";
  EXPECT_NO_THROW(FusedMoE("moe", o));  // grouped top-k takes sigmoid scores
  o = options(4, 8, 16);
  o.enable_eplb = true;
  expect_error([&] { FusedMoE("moe", o); }, ErrorCode::kUnsupported, "EPLB is only supported for FP8 quantization for now.");
  Fp8Config fp8(true);
  o.quant_config = &fp8;
  o.ep_size = 3;
  expect_invalid([&] { FusedMoE("moe", o); }, "EPLB currently only supports even distribution of experts across ranks.");
  o = options(4, 8, 16);
  o.ep_rank = 1;
  expect_invalid([&] { FusedMoE("moe", o); }, "moe: ep_rank 1 is not a rank of ep_size 1");
}

TEST(FusedMoEWeightLoader, TensorParallelNarrowing) {
  // TP rank 1 of 2, I = 16 -> 8 per rank: w1 and w3 take checkpoint rows [8, 16), w2 columns.
  FusedMoE layer("moe", options(2, 4, 16, 1, 2));
  const Tensor gate = arange({16, 4}), up = arange({16, 4}, 100), down = arange({4, 16}, -100);
  EXPECT_TRUE(layer.weight_loader("w13_weight", gate, "w13_weight", "w1", 1));
  EXPECT_TRUE(layer.weight_loader("w13_weight", up, "w13_weight", "w3", 1));
  EXPECT_TRUE(layer.weight_loader("w2_weight", down, "w2_weight", "w2", 1));
  const Tensor& w13 = layer.parameter("w13_weight").data;
  const Tensor& w2 = layer.parameter("w2_weight").data;
  for (int64_t r = 0; r < 8; ++r) {
    for (int64_t c = 0; c < 4; ++c) {
      EXPECT_EQ(at(w13, {1, r, c}), float((8 + r) * 4 + c));
      EXPECT_EQ(at(w13, {1, 8 + r, c}), float(100 + (8 + r) * 4 + c));
      EXPECT_EQ(at(w2, {1, c, r}), float(-100 + c * 16 + 8 + r));
    }
  }
  const auto& shards = layer.parameter("w13_weight").loaded_shards;
  EXPECT_TRUE(shards.count(FusedMoE::loaded_shard_key("w1", 1)) && shards.count("w3 of expert 1"));
  // A checkpoint tensor of the wrong size is refused rather than truncated by the narrowing.
  testing::expect_error_containing([&] { layer.weight_loader("w13_weight", arange({12, 4}), "w13_weight", "w1", 0); },
                                   ErrorCode::kInvalidArgument,
                                   "moe.w13_weight (shard w1 of expert 0): expected a checkpoint tensor with 16 entries");
}

TEST(FusedMoEWeightLoader, ExpertParallelSkipsOtherRanks) {
  FusedMoEOptions o = options(4, 4, 8);
  o.ep_size = 2;
  o.ep_rank = 1;  // experts 2 and 3
  FusedMoE layer("moe", o);
  Tensor& w13 = layer.parameter("w13_weight").data;
  w13.fill_bytes_(0);
  EXPECT_FALSE(layer.weight_loader("w13_weight", arange({8, 4}), "w13_weight", "w1", 1));
  EXPECT_TRUE(layer.parameter("w13_weight").loaded_shards.empty());
  EXPECT_TRUE(layer.weight_loader("w13_weight", arange({8, 4}, 1), "w13_weight", "w1", 3));
  EXPECT_EQ(at(w13, {1, 0, 0}), 1.0f);  // global expert 3 is local expert 1
  EXPECT_EQ(at(w13, {0, 0, 0}), 0.0f);
}

TEST(FusedMoEWeightLoader, ErrorsAndUnknownNames) {
  FusedMoE layer("moe", options(2, 4, 8));
  expect_invalid([&] { layer.weight_loader("w13_weight", arange({8, 4}), "w13_weight", "w4", 0); },
                 "shard_id must be ['w1','w2','w3'] but got w4.");
  // A scale into a parameter of no scale kind (the unquantized method has none).
  expect_invalid([&] { layer.weight_loader("w13_weight", arange({8, 4}), "experts.w13_weight_scale", "w1", 0); },
                 "quant method must be one of ['tensor', 'channel', 'group', 'block']");
  EXPECT_FALSE(layer.weight_loader("w13_weight", arange({8, 4}), "experts.w13_bias", "w1", 0));
  expect_invalid([&] { layer.load_weight("w13_weight", arange({8, 4}), std::nullopt); },
                 "moe.w13_weight: a MoE parameter loads through weight_loader(param, loaded, weight_name, shard_id, "
                 "expert_id)");
}

TEST(FusedMoEWeightLoader, PerTensorAndInputScales) {
  Fp8Config fp8(true, "static");
  FusedMoEOptions o = options(3, 4, 8);
  o.quant_config = &fp8;
  FusedMoE layer("moe", o);
  // The spec's defaults are 1.0 (hazard H5), not a not-loaded sentinel.
  const Tensor& s13 = layer.parameter("w13_weight_scale").data;
  for (int64_t i = 0; i < s13.numel(); ++i) EXPECT_EQ(s13.data<float>()[i], 1.0f);
  layer.weight_loader("w13_weight_scale", Tensor::scalar_f32(0.5f), "w13_weight_scale", "w1", 2);
  layer.weight_loader("w13_weight_scale", Tensor::scalar_f32(0.25f), "w13_weight_scale", "w3", 2);
  layer.weight_loader("w2_weight_scale", Tensor::from_vector<float>({0.125f}), "w2_weight_scale", "w2", 1);
  EXPECT_EQ(at(s13, {2, 0}), 0.5f);
  EXPECT_EQ(at(s13, {2, 1}), 0.25f);
  EXPECT_EQ(at(s13, {1, 0}), 1.0f);
  EXPECT_EQ(layer.parameter("w2_weight_scale").data.data<float>()[1], 0.125f);
  // Input scales: w1 and w3 share the expert's slot (the last one wins).
  layer.weight_loader("w13_input_scale", Tensor::scalar_f32(2.0f), "w13_input_scale", "w1", 0);
  layer.weight_loader("w13_input_scale", Tensor::scalar_f32(3.0f), "w13_input_scale", "w3", 0);
  layer.weight_loader("w2_input_scale", Tensor::scalar_f32(4.0f), "w2_input_scale", "w2", 2);
  EXPECT_EQ(layer.parameter("w13_input_scale").data.data<float>()[0], 3.0f);
  EXPECT_EQ(layer.parameter("w2_input_scale").data.data<float>()[2], 4.0f);
  expect_invalid([&] { layer.weight_loader("w2_weight_scale", arange({2}), "w2_weight_scale", "w2", 0); },
                 "moe.w2_weight_scale (shard w2 of expert 0): expected a single value, got a checkpoint tensor of shape [2]");
}

TEST(FusedMoEWeightLoader, BlockScalesNarrowInBlocks) {
  // I = 16, TP 2 -> 8 rows per rank = 2 blocks of 4; H = 8 -> 2 blocks.
  Fp8Config fp8(true, "dynamic", {}, std::vector<int64_t>{4, 4});
  FusedMoEOptions o = options(2, 8, 16, 1, 2);
  o.quant_config = &fp8;
  FusedMoE layer("moe", o);
  const Tensor& s13 = layer.parameter("w13_weight_scale_inv").data;
  const Tensor& s2 = layer.parameter("w2_weight_scale_inv").data;
  ASSERT_EQ(s13.shape(), (Shape{2, 4, 2}));
  ASSERT_EQ(s2.shape(), (Shape{2, 2, 2}));
  layer.weight_loader("w13_weight_scale_inv", arange({4, 2}), "w13_weight_scale_inv", "w1", 0);
  layer.weight_loader("w13_weight_scale_inv", arange({4, 2}, 10), "w13_weight_scale_inv", "w3", 0);
  layer.weight_loader("w2_weight_scale_inv", arange({2, 4}, 20), "w2_weight_scale_inv", "w2", 0);
  for (int64_t r = 0; r < 2; ++r) {
    for (int64_t c = 0; c < 2; ++c) {
      EXPECT_EQ(at(s13, {0, r, c}), float((2 + r) * 2 + c));       // checkpoint block rows 2, 3
      EXPECT_EQ(at(s13, {0, 2 + r, c}), float(10 + (2 + r) * 2 + c));
      EXPECT_EQ(at(s2, {0, r, c}), float(20 + r * 4 + 2 + c));      // checkpoint block columns 2, 3
    }
  }
  EXPECT_EQ(at(s13, {1, 0, 0}), 1.0f);
}

TEST(FusedMoEWeightLoader, ThreeDimensionalLoadsEveryExpert) {
  FusedMoE layer("moe", options(2, 4, 8));
  // [E, I, H] gate weights of every expert at once (full_load: the shard dimension moves by one).
  EXPECT_TRUE(layer.weight_loader("w13_weight", arange({2, 8, 4}), "w13_weight", "w1", 0));
  EXPECT_TRUE(layer.weight_loader("w2_weight", arange({2, 4, 8}, -200), "w2_weight", "w2", 0));
  const Tensor& w13 = layer.parameter("w13_weight").data;
  EXPECT_EQ(at(w13, {1, 7, 3}), float(1 * 32 + 7 * 4 + 3));
  EXPECT_EQ(at(layer.parameter("w2_weight").data, {1, 3, 7}), float(-200 + 32 + 3 * 8 + 7));
}

TEST(FusedMoE, MakeExpertParamsMapping) {
  const auto mapping = FusedMoE::make_expert_params_mapping("gate_proj", "down_proj", "up_proj", 2, 1);
  ASSERT_EQ(mapping.size(), 9u);
  auto same = [](const ExpertParamsMapping& m, const char* prefix, const char* name, int64_t e, const char* shard) {
    return m.param_prefix == prefix && m.weight_name == name && m.expert_id == e && m.shard_id == shard;
  };
  EXPECT_TRUE(same(mapping[0], "experts.w13_", "experts.0.gate_proj.", 0, "w1"));
  EXPECT_TRUE(same(mapping[1], "experts.w2_", "experts.0.down_proj.", 0, "w2"));
  EXPECT_TRUE(same(mapping[2], "experts.w13_", "experts.0.up_proj.", 0, "w3"));
  EXPECT_TRUE(same(mapping[5], "experts.w13_", "experts.1.up_proj.", 1, "w3"));
  // The redundant physical expert 2 replicates logical expert 0.
  EXPECT_TRUE(same(mapping[6], "experts.w13_", "experts.0.gate_proj.", 2, "w1"));
  const auto mixtral = FusedMoE::make_expert_params_mapping("w1", "w2", "w3", 8);
  EXPECT_TRUE(same(mixtral[23], "experts.w13_", "experts.7.w3.", 7, "w3"));
}

}  // namespace
}  // namespace fp8kit
