// Weight loaders of the unfused linear layers and of stacked shards (spec 1.12, vLLM
// weight_loader_v2): column rows per rank, row columns per rank with the bias whole, merged
// gate/up shards, q/k/v shards at TP 1, 2, 4 with GQA and kv-head replication, layers fused on
// disk, and the error texts. Values name their checkpoint row and column, so every assertion
// says which checkpoint entries landed where.
#include <gtest/gtest.h>

#include "expect_error.h"
#include "fp8kit/layers/linear.h"
#include "test_linear_util.h"

namespace fp8kit {
namespace {

using linear_test::at;
using linear_test::same_bits;
using linear_test::same_rows;
using linear_test::tagged;
using testing::expect_invalid;

LinearOptions f32_tp(int rank, int size, bool bias = true) {
  LinearOptions o;
  o.params_dtype = DType::kF32;
  o.parallel = {rank, size};
  o.bias = bias;
  return o;
}

// A [n] f32 vector tag * 1e6 + i.
Tensor tagged_vector(int64_t n, int tag) { return tagged(n, 1, tag).view({n}); }

using linear_test::kK;
using linear_test::kQ;
using linear_test::kV;

TEST(LinearLoad, ColumnTakesThisRanksOutputRows) {
  const Tensor w = tagged(8, 4, 1), b = tagged_vector(8, 2);
  for (int rank = 0; rank < 2; ++rank) {
    ColumnParallelLinear l("c", 4, 8, f32_tp(rank, 2));
    l.load_weight("weight", w, std::nullopt);
    l.load_weight("bias", b, std::nullopt);
    EXPECT_TRUE(same_rows(l.parameter("weight").data, 0, w, rank * 4, 4));
    EXPECT_TRUE(same_rows(l.parameter("bias").data, 0, b, rank * 4, 4));
    EXPECT_EQ(l.parameter("weight").loaded_shards, (std::set<std::string>{"all"}));
  }
}

TEST(LinearLoad, RowTakesThisRanksInputColumnsAndTheWholeBias) {
  const Tensor w = tagged(3, 8, 1), b = tagged_vector(3, 2);
  for (int rank = 0; rank < 4; ++rank) {
    RowParallelLinear l("r", 8, 3, f32_tp(rank, 4));
    l.load_weight("weight", w, std::nullopt);
    l.load_weight("bias", b, std::nullopt);
    const Tensor& p = l.parameter("weight").data;
    for (int64_t i = 0; i < 3; ++i) {
      for (int64_t j = 0; j < 2; ++j) EXPECT_EQ(at(p, i, j), at(w, i, rank * 2 + j));
    }
    EXPECT_TRUE(same_bits(l.parameter("bias").data, b));
  }
}

TEST(LinearLoad, ReplicatedLoadsWhole) {
  const Tensor w = tagged(5, 3, 1);
  ReplicatedLinear l("lm_head", 3, 5, f32_tp(1, 2));
  l.load_weight("weight", w, std::nullopt);
  EXPECT_TRUE(same_bits(l.parameter("weight").data, w));
  expect_invalid([&] { l.load_weight("weight", tagged(5, 4, 1), std::nullopt); },
                 "lm_head.weight: expected a checkpoint tensor of shape [5, 3], got [5, 4]");
  expect_invalid([&] { l.load_weight("weight", w, ShardId{int64_t(0)}); },
                 "lm_head.weight (shard 0): this layer is not fused and takes no shard id");
}

TEST(LinearLoad, CheckpointShapeErrorsNameTheLoad) {
  ColumnParallelLinear l("model.c", 4, 8, f32_tp(1, 2));
  expect_invalid([&] { l.load_weight("weight", tagged(4, 4, 1), std::nullopt); },
                 "model.c.weight: the checkpoint tensor of shape [4, 4] has no entries [4, 8) along dimension 0");
  expect_invalid([&] { l.load_weight("weight", tagged(8, 5, 1), std::nullopt); },
                 "model.c.weight: expected a checkpoint tensor of shape [4, 4], got [4, 5]");
  RowParallelLinear r("model.r", 8, 3, f32_tp(1, 2));
  expect_invalid([&] { r.load_weight("weight", tagged(3, 6, 1), std::nullopt); },
                 "model.r.weight: the checkpoint tensor of shape [3, 6] has no entries [4, 8) along dimension 1");
}

TEST(LinearLoad, MergedGateUpShards) {
  const Tensor gate = tagged(8, 4, 1), up = tagged(8, 4, 2);
  const Tensor gate_b = tagged_vector(8, 3), up_b = tagged_vector(8, 4);
  for (int size : {1, 2, 4}) {
    for (int rank = 0; rank < size; ++rank) {
      SCOPED_TRACE(::testing::Message() << "tp " << size << " rank " << rank);
      MergedColumnParallelLinear l("gate_up_proj", 4, {8, 8}, f32_tp(rank, size));
      l.load_weight("weight", gate, ShardId{int64_t(0)});
      l.load_weight("weight", up, ShardId{int64_t(1)});
      l.load_weight("bias", up_b, ShardId{int64_t(1)});
      l.load_weight("bias", gate_b, ShardId{int64_t(0)});
      const int64_t rows = 8 / size;
      const Tensor& w = l.parameter("weight").data;
      EXPECT_TRUE(same_rows(w, 0, gate, rank * rows, rows));
      EXPECT_TRUE(same_rows(w, rows, up, rank * rows, rows));
      EXPECT_TRUE(same_rows(l.parameter("bias").data, 0, gate_b, rank * rows, rows));
      EXPECT_TRUE(same_rows(l.parameter("bias").data, rows, up_b, rank * rows, rows));
      EXPECT_EQ(l.parameter("weight").loaded_shards, (std::set<std::string>{"0", "1"}));
    }
  }
}

TEST(LinearLoad, MergedUnequalShards) {
  // Three stacked layers of 12, 4 and 8 rows at TP 4: 3, 1 and 2 rows per rank.
  const Tensor a = tagged(12, 2, 1), b = tagged(4, 2, 2), c = tagged(8, 2, 3);
  MergedColumnParallelLinear l("m", 2, {12, 4, 8}, f32_tp(2, 4, false));
  l.load_weight("weight", c, ShardId{int64_t(2)});
  l.load_weight("weight", a, ShardId{int64_t(0)});
  l.load_weight("weight", b, ShardId{int64_t(1)});
  const Tensor& w = l.parameter("weight").data;
  EXPECT_TRUE(same_rows(w, 0, a, 6, 3));
  EXPECT_TRUE(same_rows(w, 3, b, 2, 1));
  EXPECT_TRUE(same_rows(w, 4, c, 4, 2));
}

TEST(LinearLoad, MergedFusedOnDiskEqualsShards) {
  const Tensor gate = tagged(8, 4, 1), up = tagged(8, 4, 2);
  Tensor fused = Tensor::empty({16, 4}, DType::kF32);
  fused.narrow(0, 0, 8).copy_(gate);
  fused.narrow(0, 8, 8).copy_(up);
  for (int rank = 0; rank < 2; ++rank) {
    MergedColumnParallelLinear sharded("gate_up_proj", 4, {8, 8}, f32_tp(rank, 2, false));
    sharded.load_weight("weight", gate, ShardId{int64_t(0)});
    sharded.load_weight("weight", up, ShardId{int64_t(1)});
    MergedColumnParallelLinear on_disk("gate_up_proj", 4, {8, 8}, f32_tp(rank, 2, false));
    on_disk.load_weight("weight", fused, std::nullopt);
    EXPECT_TRUE(same_bits(on_disk.parameter("weight").data, sharded.parameter("weight").data));
    EXPECT_EQ(on_disk.parameter("weight").loaded_shards, (std::set<std::string>{"0", "1", "all"}));
  }
}

TEST(LinearLoad, MergedShardIdErrors) {
  MergedColumnParallelLinear l("mlp.gate_up_proj", 4, {8, 8}, f32_tp(0, 1, false));
  expect_invalid([&] { l.load_weight("weight", tagged(8, 4, 1), ShardId{int64_t(2)}); },
                 "mlp.gate_up_proj.weight: Shard id should be between 0 and 1. Got shard id 2.");
  expect_invalid([&] { l.load_weight("weight", tagged(8, 4, 1), kQ); },
                 "mlp.gate_up_proj.weight: Shard id should be between 0 and 1. Got shard id q.");
  expect_invalid([&] { l.load_weight("weight", tagged(8, 3, 1), ShardId{int64_t(1)}); },
                 "mlp.gate_up_proj.weight (shard 1): expected a checkpoint tensor of shape [8, 4], got [8, 3]");
}

// 8 query heads and 2 kv heads of size 2, hidden 4: q has 16 checkpoint rows, k and v 4 each.
struct QkvCheckpoint {
  Tensor q = tagged(16, 4, 1), k = tagged(4, 4, 2), v = tagged(4, 4, 3);
  Tensor qb = tagged_vector(16, 4), kb = tagged_vector(4, 5), vb = tagged_vector(4, 6);
};

TEST(LinearLoad, QkvShardsWithGqaAtTp124) {
  const QkvCheckpoint ck;
  for (int size : {1, 2, 4}) {
    for (int rank = 0; rank < size; ++rank) {
      SCOPED_TRACE(::testing::Message() << "tp " << size << " rank " << rank);
      QKVParallelLinear l("qkv_proj", 4, 2, 8, 2, f32_tp(rank, size));
      l.load_weight("weight", ck.v, kV);
      l.load_weight("weight", ck.q, kQ);
      l.load_weight("weight", ck.k, kK);
      l.load_weight("bias", ck.qb, kQ);
      l.load_weight("bias", ck.kb, kK);
      l.load_weight("bias", ck.vb, kV);
      const int64_t q_rows = 16 / size;
      const int64_t kv_rows = size >= 2 ? 2 : 4;  // one kv head per rank from TP 2 on
      const int64_t kv_rank = size == 4 ? rank / 2 : rank;  // TP 4: two ranks share a kv head
      const Tensor& w = l.parameter("weight").data;
      const Tensor& b = l.parameter("bias").data;
      EXPECT_TRUE(same_rows(w, 0, ck.q, rank * q_rows, q_rows));
      EXPECT_TRUE(same_rows(w, q_rows, ck.k, kv_rank * kv_rows, kv_rows));
      EXPECT_TRUE(same_rows(w, q_rows + kv_rows, ck.v, kv_rank * kv_rows, kv_rows));
      EXPECT_TRUE(same_rows(b, 0, ck.qb, rank * q_rows, q_rows));
      EXPECT_TRUE(same_rows(b, q_rows, ck.kb, kv_rank * kv_rows, kv_rows));
      EXPECT_TRUE(same_rows(b, q_rows + kv_rows, ck.vb, kv_rank * kv_rows, kv_rows));
      EXPECT_EQ(l.parameter("weight").loaded_shards, (std::set<std::string>{"k", "q", "v"}));
    }
  }
  // One hand-checked value: TP 4, rank 3 reads k head 1 (rows 2, 3 of k).
  QKVParallelLinear l("qkv_proj", 4, 2, 8, 2, f32_tp(3, 4, false));
  l.load_weight("weight", ck.k, kK);
  EXPECT_EQ(at(l.parameter("weight").data, 4, 1), 2002001.0f);  // tag 2, row 2, column 1
}

TEST(LinearLoad, QkvFusedOnDiskEqualsShards) {
  const QkvCheckpoint ck;
  Tensor fused = Tensor::empty({24, 4}, DType::kF32), fused_b = Tensor::empty({24}, DType::kF32);
  fused.narrow(0, 0, 16).copy_(ck.q);
  fused.narrow(0, 16, 4).copy_(ck.k);
  fused.narrow(0, 20, 4).copy_(ck.v);
  fused_b.narrow(0, 0, 16).copy_(ck.qb);
  fused_b.narrow(0, 16, 4).copy_(ck.kb);
  fused_b.narrow(0, 20, 4).copy_(ck.vb);
  for (int size : {1, 2, 4}) {
    for (int rank = 0; rank < size; ++rank) {
      QKVParallelLinear sharded("qkv_proj", 4, 2, 8, 2, f32_tp(rank, size));
      for (const auto& [id, w, b] : {std::tuple{kQ, ck.q, ck.qb}, std::tuple{kK, ck.k, ck.kb}, std::tuple{kV, ck.v, ck.vb}}) {
        sharded.load_weight("weight", w, id);
        sharded.load_weight("bias", b, id);
      }
      QKVParallelLinear on_disk("qkv_proj", 4, 2, 8, 2, f32_tp(rank, size));
      on_disk.load_weight("weight", fused, std::nullopt);
      on_disk.load_weight("bias", fused_b, std::nullopt);
      EXPECT_TRUE(same_bits(on_disk.parameter("weight").data, sharded.parameter("weight").data));
      EXPECT_TRUE(same_bits(on_disk.parameter("bias").data, sharded.parameter("bias").data));
    }
  }
}

TEST(LinearLoad, QkvShardIdErrors) {
  QKVParallelLinear l("attn.qkv_proj", 4, 2, 8, 2, f32_tp(0, 1, false));
  expect_invalid([&] { l.load_weight("weight", tagged(16, 4, 1), ShardId{std::string("o")}); },
                 "attn.qkv_proj.weight: Shard id for QKVParallelLinear should be 'q', 'k', or 'v', got shard id o.");
  expect_invalid([&] { l.load_weight("weight", tagged(16, 4, 1), ShardId{int64_t(0)}); },
                 "attn.qkv_proj.weight: Shard id for QKVParallelLinear should be 'q', 'k', or 'v', got shard id 0.");
  expect_invalid([&] { l.load_weight("weight", tagged(4, 3, 1), kK); },
                 "attn.qkv_proj.weight (shard k): expected a checkpoint tensor of shape [4, 4], got [4, 3]");
  expect_invalid([&] { l.load_weight("weight", tagged(3, 4, 1), kK); },
                 "attn.qkv_proj.weight (shard k): the checkpoint tensor of shape [3, 4] has no entries [0, 4) along "
                 "dimension 0");
}

}  // namespace
}  // namespace fp8kit
