// Loading FP8 scales into linear layers (spec 1.12): per-tensor scales into their shard's slot
// (0-dim AutoFP8 values, [1] compressed-tensors values, bf16 values widened), one scale of a
// layer fused on disk into slot 0 only, 0-dim scales of unfused layers, and block-scale offsets
// counted in blocks for merged, QKV (the Qwen3 case) and row-parallel layers.
#include <gtest/gtest.h>

#include <cfloat>

#include "expect_error.h"
#include "fp8kit/layers/fp8_config.h"
#include "fp8kit/layers/linear.h"
#include "test_linear_util.h"

namespace fp8kit {
namespace {

using linear_test::same_bits;
using linear_test::same_rows;
using linear_test::tagged;
using linear_test::tagged_e4m3;
using linear_test::values;
using testing::expect_invalid;

using linear_test::kK;
using linear_test::kQ;
using linear_test::kV;
using linear_test::kNot;

LinearOptions fp8_tp(const Fp8Config& config, int rank, int size) {
  LinearOptions o;
  o.quant_config = &config;
  o.parallel = {rank, size};
  return o;
}

Tensor bf16_scalar(float v) {
  Tensor t = Tensor::empty({}, DType::kBF16);
  t.data<BFloat16>()[0] = float_to_bf16(v);
  return t;
}

TEST(LinearLoadScales, QkvPerTensorScalesIntoSlots) {
  const Fp8Config config(true, "static");
  QKVParallelLinear l("qkv_proj", 32, 8, 4, 2, fp8_tp(config, 0, 1));
  EXPECT_EQ(values(l.parameter("weight_scale").data), (std::vector<float>{kNot, kNot, kNot}));
  l.load_weight("weight_scale", Tensor::scalar_f32(0.5f), kK);                    // AutoFP8: 0-dim
  l.load_weight("weight_scale", linear_test::f32_vector({0.25f}), kQ);            // compressed-tensors: [1]
  EXPECT_EQ(values(l.parameter("weight_scale").data), (std::vector<float>{0.25f, 0.5f, kNot}));
  l.load_weight("weight_scale", bf16_scalar(0.0078125f), kV);                     // bf16, widened
  EXPECT_EQ(values(l.parameter("weight_scale").data), (std::vector<float>{0.25f, 0.5f, 0.0078125f}));
  l.load_weight("input_scale", Tensor::scalar_f32(2.0f), kV);
  EXPECT_EQ(values(l.parameter("input_scale").data), (std::vector<float>{kNot, kNot, 2.0f}));
  EXPECT_EQ(l.parameter("weight_scale").loaded_shards, (std::set<std::string>{"k", "q", "v"}));
  expect_invalid([&] { l.load_weight("weight_scale", linear_test::f32_vector({1, 2}), kQ); },
                 "qkv_proj.weight_scale (shard q): a per-tensor scale must be 0-dim or of shape [1], got shape [2]");
}

TEST(LinearLoadScales, MergedPerTensorScalesIntoSlots) {
  const Fp8Config config(true, "dynamic");
  MergedColumnParallelLinear l("gate_up_proj", 32, {64, 64}, fp8_tp(config, 1, 2));
  EXPECT_EQ(l.find_parameter("input_scale"), nullptr);  // dynamic activations
  l.load_weight("weight_scale", Tensor::scalar_f32(3.0f), ShardId{int64_t(1)});
  l.load_weight("weight_scale", linear_test::f32_vector({1.5f}), ShardId{int64_t(0)});
  EXPECT_EQ(values(l.parameter("weight_scale").data), (std::vector<float>{1.5f, 3.0f}));
}

TEST(LinearLoadScales, FusedOnDiskQkvWeightAndOneScale) {
  // Phi-3 style: qkv_proj stored fused, one weight_scale for all of it: slot 0 only, so
  // requantize_with_max_scale sees the sentinel and leaves the weight alone.
  const Fp8Config config(true, "static");
  const Tensor fused = tagged_e4m3(64, 32, 1);  // q 32 rows, k 16, v 16
  for (int rank = 0; rank < 2; ++rank) {
    QKVParallelLinear l("qkv_proj", 32, 8, 4, 2, fp8_tp(config, rank, 2));
    l.load_weight("weight", fused, std::nullopt);
    l.load_weight("weight_scale", Tensor::scalar_f32(0.125f), std::nullopt);
    l.load_weight("input_scale", linear_test::f32_vector({0.5f}), std::nullopt);
    const Tensor& w = l.parameter("weight").data;
    EXPECT_TRUE(same_rows(w, 0, fused, rank * 16, 16));
    EXPECT_TRUE(same_rows(w, 16, fused, 32 + rank * 8, 8));
    EXPECT_TRUE(same_rows(w, 24, fused, 48 + rank * 8, 8));
    EXPECT_EQ(values(l.parameter("weight_scale").data), (std::vector<float>{0.125f, kNot, kNot}));
    EXPECT_EQ(values(l.parameter("input_scale").data), (std::vector<float>{0.5f, kNot, kNot}));
    EXPECT_EQ(l.parameter("weight").loaded_shards, (std::set<std::string>{"all", "k", "q", "v"}));
    EXPECT_EQ(l.parameter("weight_scale").loaded_shards, (std::set<std::string>{"all"}));
  }
  MergedColumnParallelLinear m("gate_up_proj", 32, {16, 16}, fp8_tp(config, 0, 1));
  m.load_weight("weight_scale", Tensor::scalar_f32(0.25f), std::nullopt);
  EXPECT_EQ(values(m.parameter("weight_scale").data), (std::vector<float>{0.25f, kNot}));
}

TEST(LinearLoadScales, ScalarScalesOfUnfusedLayers) {
  const Fp8Config config(true, "static");
  ColumnParallelLinear c("c", 16, 32, fp8_tp(config, 1, 2));
  RowParallelLinear r("r", 16, 32, fp8_tp(config, 1, 2));
  ReplicatedLinear p("p", 16, 32, fp8_tp(config, 1, 2));
  for (LinearBase* l : std::initializer_list<LinearBase*>{&c, &r, &p}) {
    SCOPED_TRACE(l->prefix());
    EXPECT_EQ(l->parameter("weight_scale").data.shape(), (Shape{1}));
    l->load_weight("weight_scale", Tensor::scalar_f32(0.75f), std::nullopt);  // 0-dim -> [1]
    EXPECT_EQ(values(l->parameter("weight_scale").data), (std::vector<float>{0.75f}));
    l->load_weight("input_scale", linear_test::f32_vector({0.5f}), std::nullopt);  // [1]
    EXPECT_EQ(values(l->parameter("input_scale").data), (std::vector<float>{0.5f}));
    l->load_weight("weight_scale", bf16_scalar(2.0f), std::nullopt);
    EXPECT_EQ(values(l->parameter("weight_scale").data), (std::vector<float>{2.0f}));
  }
  expect_invalid([&] { c.load_weight("weight_scale", linear_test::f32_vector({1, 2}), std::nullopt); },
                 "c.weight_scale: expected a checkpoint tensor of shape [1], got [2]");
}

TEST(LinearLoadScales, FusedWeightsLoadRowsOfFp8) {
  const Fp8Config config(true, "dynamic");
  const Tensor gate = tagged_e4m3(64, 16, 1), up = tagged_e4m3(64, 16, 2);
  for (int rank = 0; rank < 2; ++rank) {
    MergedColumnParallelLinear l("gate_up_proj", 16, {64, 64}, fp8_tp(config, rank, 2));
    l.load_weight("weight", up, ShardId{int64_t(1)});
    l.load_weight("weight", gate, ShardId{int64_t(0)});
    EXPECT_TRUE(same_rows(l.parameter("weight").data, 0, gate, rank * 32, 32));
    EXPECT_TRUE(same_rows(l.parameter("weight").data, 32, up, rank * 32, 32));
  }
}

// ---- block scales: offsets and sizes in blocks of block_n rows ----

TEST(LinearLoadScales, MergedBlockScales) {
  // block [4, 4]; gate 16 rows (4 blocks), up 8 rows (2 blocks), K = 8 (2 blocks).
  const Fp8Config config(true, "dynamic", {}, std::vector<int64_t>{4, 4});
  const Tensor gate_s = tagged(4, 2, 1), up_s = tagged(2, 2, 2);
  Tensor fused_s = Tensor::empty({6, 2}, DType::kF32);
  fused_s.narrow(0, 0, 4).copy_(gate_s);
  fused_s.narrow(0, 4, 2).copy_(up_s);
  for (int size : {1, 2}) {
    for (int rank = 0; rank < size; ++rank) {
      SCOPED_TRACE(::testing::Message() << "tp " << size << " rank " << rank);
      MergedColumnParallelLinear l("gate_up_proj", 8, {16, 8}, fp8_tp(config, rank, size));
      EXPECT_EQ(l.parameter("weight_scale_inv").data.shape(), (Shape{6 / size, 2}));
      l.load_weight("weight_scale_inv", up_s, ShardId{int64_t(1)});
      l.load_weight("weight_scale_inv", gate_s, ShardId{int64_t(0)});
      const Tensor& s = l.parameter("weight_scale_inv").data;
      // Shard 1 starts at ceil(16 / 4) / tp blocks and has ceil(8 / 4) / tp of them.
      EXPECT_TRUE(same_rows(s, 0, gate_s, rank * (4 / size), 4 / size));
      EXPECT_TRUE(same_rows(s, 4 / size, up_s, rank * (2 / size), 2 / size));
      MergedColumnParallelLinear on_disk("gate_up_proj", 8, {16, 8}, fp8_tp(config, rank, size));
      on_disk.load_weight("weight_scale_inv", fused_s, std::nullopt);
      EXPECT_TRUE(same_bits(on_disk.parameter("weight_scale_inv").data, s));
    }
  }
}

TEST(LinearLoadScales, QkvBlockScalesWithReplication) {
  // block [4, 4]; 4 query heads and 2 kv heads of size 4, hidden 8: q 4 blocks, k and v 2.
  const Fp8Config config(true, "dynamic", {}, std::vector<int64_t>{4, 4});
  const Tensor qs = tagged(4, 2, 1), ks = tagged(2, 2, 2), vs = tagged(2, 2, 3);
  Tensor fused = Tensor::empty({8, 2}, DType::kF32);
  fused.narrow(0, 0, 4).copy_(qs);
  fused.narrow(0, 4, 2).copy_(ks);
  fused.narrow(0, 6, 2).copy_(vs);
  for (int size : {1, 2, 4}) {
    for (int rank = 0; rank < size; ++rank) {
      SCOPED_TRACE(::testing::Message() << "tp " << size << " rank " << rank);
      QKVParallelLinear l("qkv_proj", 8, 4, 4, 2, fp8_tp(config, rank, size));
      l.load_weight("weight_scale_inv", qs, kQ);
      l.load_weight("weight_scale_inv", ks, kK);
      l.load_weight("weight_scale_inv", vs, kV);
      const int64_t q_blocks = 4 / size, kv_blocks = size == 1 ? 2 : 1;
      const int64_t kv_rank = size == 4 ? rank / 2 : rank;
      const Tensor& s = l.parameter("weight_scale_inv").data;
      EXPECT_EQ(s.shape(), (Shape{q_blocks + 2 * kv_blocks, 2}));
      EXPECT_TRUE(same_rows(s, 0, qs, rank * q_blocks, q_blocks));
      EXPECT_TRUE(same_rows(s, q_blocks, ks, kv_rank * kv_blocks, kv_blocks));
      EXPECT_TRUE(same_rows(s, q_blocks + kv_blocks, vs, kv_rank * kv_blocks, kv_blocks));
      QKVParallelLinear on_disk("qkv_proj", 8, 4, 4, 2, fp8_tp(config, rank, size));
      on_disk.load_weight("weight_scale_inv", fused, std::nullopt);
      EXPECT_TRUE(same_bits(on_disk.parameter("weight_scale_inv").data, s));
    }
  }
}

TEST(LinearLoadScales, Qwen3QkvBlockScales) {
  // Qwen3-0.6B-FP8's attention: hidden 1024, 16 query heads and 8 kv heads of 128, blocks of
  // [128, 128]. q has 16 scale rows, k and v 8 each, K has 8 blocks. The scale rows of k start
  // at ceil(q rows of this rank / 128), not at the element offset.
  const Fp8Config config(true, "dynamic", {}, std::vector<int64_t>{128, 128});
  const Tensor qs = tagged(16, 8, 1), ks = tagged(8, 8, 2), vs = tagged(8, 8, 3);
  struct Case {
    int tp, rank;
    int64_t q_blocks, kv_blocks, kv_rank;
  };
  for (const Case& c : {Case{1, 0, 16, 8, 0}, Case{2, 1, 8, 4, 1}, Case{16, 13, 1, 1, 6}}) {
    SCOPED_TRACE(::testing::Message() << "tp " << c.tp << " rank " << c.rank);
    QKVParallelLinear l("model.layers.0.self_attn.qkv_proj", 1024, 128, 16, 8, fp8_tp(config, c.rank, c.tp));
    l.load_weight("weight_scale_inv", vs, kV);
    l.load_weight("weight_scale_inv", ks, kK);
    l.load_weight("weight_scale_inv", qs, kQ);
    const Tensor& s = l.parameter("weight_scale_inv").data;
    EXPECT_EQ(s.shape(), (Shape{c.q_blocks + 2 * c.kv_blocks, 8}));
    EXPECT_TRUE(same_rows(s, 0, qs, c.rank * c.q_blocks, c.q_blocks));
    EXPECT_TRUE(same_rows(s, c.q_blocks, ks, c.kv_rank * c.kv_blocks, c.kv_blocks));
    EXPECT_TRUE(same_rows(s, c.q_blocks + c.kv_blocks, vs, c.kv_rank * c.kv_blocks, c.kv_blocks));
  }
}

TEST(LinearLoadScales, RowBlockScalesNarrowKBlocks) {
  // K = 16 over 2 ranks: 8 per rank, 2 blocks of 4; the checkpoint has 4 K-blocks.
  const Fp8Config config(true, "dynamic", {}, std::vector<int64_t>{4, 4});
  const Tensor s = tagged(2, 4, 1);
  for (int rank = 0; rank < 2; ++rank) {
    RowParallelLinear l("down_proj", 16, 8, fp8_tp(config, rank, 2));
    l.load_weight("weight_scale_inv", s, std::nullopt);
    const Tensor& p = l.parameter("weight_scale_inv").data;
    ASSERT_EQ(p.shape(), (Shape{2, 2}));
    for (int64_t i = 0; i < 2; ++i) {
      for (int64_t j = 0; j < 2; ++j) EXPECT_EQ(linear_test::at(p, i, j), linear_test::at(s, i, rank * 2 + j));
    }
  }
}

TEST(LinearLoadScales, ColumnBlockScalesTakeThisRanksBlocks) {
  const Fp8Config config(true, "dynamic", {}, std::vector<int64_t>{4, 4});
  const Tensor s = tagged(4, 3, 1);  // N = 16, K = 10 (ceil(10 / 4) = 3 blocks)
  ColumnParallelLinear l("c", 10, 16, fp8_tp(config, 1, 2));
  l.load_weight("weight_scale_inv", s, std::nullopt);
  EXPECT_TRUE(same_rows(l.parameter("weight_scale_inv").data, 0, s, 2, 2));
}

}  // namespace
}  // namespace fp8kit
