// The linear layers' sizes per rank (vLLM linear.py): partitions of each class at TP 1, 2, 4,
// kv-head replication, bias shapes, the unquantized method's weight, tensor-parallel errors and
// forward's input checks.
#include <gtest/gtest.h>

#include "expect_error.h"
#include "test_context.h"
#include "fp8kit/layers/linear.h"
#include "fp8kit/layers/unquantized_linear_method.h"

namespace fp8kit {
namespace {

using testing::expect_invalid;

LinearOptions tp(int rank, int size, bool bias = false, DType dtype = DType::kBF16) {
  LinearOptions o;
  o.parallel = {rank, size};
  o.bias = bias;
  o.params_dtype = dtype;
  return o;
}

TEST(LinearSizes, Replicated) {
  ReplicatedLinear l("lm_head", 64, 100, tp(1, 2, true));
  EXPECT_EQ(l.input_size_per_partition(), 64);
  EXPECT_EQ(l.output_size_per_partition(), 100);
  EXPECT_EQ(l.output_partition_sizes(), (std::vector<int64_t>{100}));
  EXPECT_EQ(l.parameter("weight").data.shape(), (Shape{100, 64}));
  EXPECT_EQ(l.parameter("weight").data.dtype(), DType::kBF16);
  EXPECT_EQ(l.parameter("bias").data.shape(), (Shape{100}));
  EXPECT_EQ(l.quant_method()->name(), "UnquantizedLinearMethod");
  EXPECT_NE(dynamic_cast<UnquantizedLinearMethod*>(&l.linear_method()), nullptr);
}

TEST(LinearSizes, ColumnSplitsOutput) {
  for (int size : {1, 2, 4}) {
    ColumnParallelLinear l("c", 32, 96, tp(size - 1, size, true));
    EXPECT_EQ(l.input_size_per_partition(), 32);
    EXPECT_EQ(l.output_size_per_partition(), 96 / size);
    EXPECT_EQ(l.parameter("weight").data.shape(), (Shape{96 / size, 32}));
    EXPECT_EQ(l.parameter("bias").data.shape(), (Shape{96 / size}));
    EXPECT_EQ(l.parameter("bias").kind, ParameterKind::kBias);
  }
  expect_invalid([] { ColumnParallelLinear("model.c", 32, 90, tp(0, 4)); },
                 "model.c: output_size = 90 is not divisible by the tensor-parallel size 4");
}

TEST(LinearSizes, RowSplitsInputKeepsBiasWhole) {
  RowParallelLinear l("o_proj", 128, 48, tp(3, 4, true, DType::kF16));
  EXPECT_EQ(l.input_size_per_partition(), 32);
  EXPECT_EQ(l.output_size_per_partition(), 48);
  EXPECT_EQ(l.parameter("weight").data.shape(), (Shape{48, 32}));
  EXPECT_EQ(l.parameter("weight").data.dtype(), DType::kF16);
  EXPECT_EQ(l.parameter("bias").data.shape(), (Shape{48}));
  expect_invalid([] { RowParallelLinear("o_proj", 100, 48, tp(0, 8)); },
                 "o_proj: input_size = 100 is not divisible by the tensor-parallel size 8");
}

TEST(LinearSizes, MergedColumn) {
  MergedColumnParallelLinear l("gate_up_proj", 64, {256, 256}, tp(1, 2));
  EXPECT_EQ(l.output_size(), 512);
  EXPECT_EQ(l.output_sizes(), (std::vector<int64_t>{256, 256}));
  EXPECT_EQ(l.output_partition_sizes(), (std::vector<int64_t>{128, 128}));
  EXPECT_EQ(l.parameter("weight").data.shape(), (Shape{256, 64}));
  MergedColumnParallelLinear uneven("m", 8, {12, 4, 8}, tp(0, 4));
  EXPECT_EQ(uneven.output_partition_sizes(), (std::vector<int64_t>{3, 1, 2}));
  expect_invalid([] { MergedColumnParallelLinear("m", 8, {12, 6}, tp(0, 4)); },
                 "m: output_sizes[1] = 6 is not divisible by the tensor-parallel size 4");
  expect_invalid([] { MergedColumnParallelLinear("m", 8, {}, tp(0, 1)); }, "m: output_sizes must not be empty");
}

TEST(LinearSizes, QkvWithGqaAndReplication) {
  struct Case {
    int tp;
    int64_t heads, kv_heads, replicas;
  };
  // 8 query heads, 2 kv heads, head size 16.
  for (const Case& c : {Case{1, 8, 2, 1}, Case{2, 4, 1, 1}, Case{4, 2, 1, 2}, Case{8, 1, 1, 4}}) {
    SCOPED_TRACE(c.tp);
    QKVParallelLinear l("qkv_proj", 128, 16, 8, 2, tp(c.tp - 1, c.tp, true));
    EXPECT_EQ(l.num_heads(), c.heads);
    EXPECT_EQ(l.num_kv_heads(), c.kv_heads);
    EXPECT_EQ(l.num_kv_head_replicas(), c.replicas);
    EXPECT_EQ(l.output_partition_sizes(), (std::vector<int64_t>{c.heads * 16, c.kv_heads * 16, c.kv_heads * 16}));
    // vLLM's output_size counts the replicated kv heads on every rank.
    EXPECT_EQ(l.output_size(), (c.heads + 2 * c.kv_heads) * 16 * c.tp);
    EXPECT_EQ(l.parameter("weight").data.shape(), (Shape{(c.heads + 2 * c.kv_heads) * 16, 128}));
    EXPECT_EQ(l.parameter("bias").data.shape(), (Shape{(c.heads + 2 * c.kv_heads) * 16}));
  }
  QKVParallelLinear mha("qkv", 64, 16, 4, std::nullopt, tp(0, 1));
  EXPECT_EQ(mha.total_num_kv_heads(), 4);
  EXPECT_EQ(mha.output_partition_sizes(), (std::vector<int64_t>{64, 64, 64}));
  expect_invalid([] { QKVParallelLinear("qkv", 64, 16, 6, 2, tp(0, 4)); },
                 "qkv: total_num_heads = 6 is not divisible by the tensor-parallel size 4");
  expect_invalid([] { QKVParallelLinear("qkv", 64, 16, 12, 3, tp(0, 4)); },
                 "qkv: the tensor-parallel size 4 is not divisible by total_num_kv_heads = 3 (kv heads are replicated "
                 "across ranks)");
}

TEST(LinearSizes, BadOptions) {
  expect_invalid([] { ColumnParallelLinear("c", 8, 8, tp(2, 2)); }, "c: tp_rank 2 is not a rank of tp_size 2");
  expect_invalid([] { RowParallelLinear("r", 8, 8, tp(0, 0)); }, "r: tp_rank 0 is not a rank of tp_size 0");
  expect_invalid([] { ColumnParallelLinear("c", 8, 8, tp(0, 0)); }, "c: tp_size must be positive, got 0");
  expect_invalid([] { ReplicatedLinear("r", 0, 8); }, "r: input_size and output_size must be positive, got 0 and 8");
  expect_invalid([] { ReplicatedLinear("r", 8, 8, tp(0, 1, false, DType::kE4M3FN)); },
                 "r: params_dtype must be bf16, f16 or f32, got e4m3fn");
}

TEST(LinearSizes, ForwardChecksInput) {
  ReplicatedLinear l("proj", 8, 4);
  expect_invalid([&] { l.forward(cpu_ctx(), Tensor::zeros({2, 7}, DType::kBF16)); },
                 "proj: the input must be [..., 8] (input features of this rank), got bf16[2, 7] on cpu");
  RowParallelLinear row("down", 8, 4, tp(1, 2));
  expect_invalid([&] { row.forward(cpu_ctx(), Tensor::zeros({3, 8}, DType::kBF16)); },
                 "down: the input must be [..., 4] (input features of this rank), got bf16[3, 8] on cpu");
}

}  // namespace
}  // namespace fp8kit
