// embedding on the CPU (src/ops/embedding/): rows copied bit for bit (NaN payloads included) for
// every dtype, a strided table, i32 and i64 ids of any shape, the vocab-parallel mask (ids of
// other ranks give zero rows), empty inputs, and the errors.
#include <gtest/gtest.h>

#include <cstring>

#include "expect_error.h"
#include "fp8kit/ops/embedding.h"
#include "ops_test_util.h"

namespace fp8kit {
namespace {

using ops_test::make_tensor;
using ops_test::to_floats;
using testing::expect_error;
using testing::expect_invalid;

TEST(Embedding, CopiesRowsEveryDtype) {
  ForwardContext ctx;
  for (DType dt : ops_test::kFloatDTypes) {
    // [5, 3] rows of a [5, 4] buffer: row r holds 10 r + (0, 1, 2), the spare column -1.
    std::vector<float> buf;
    for (int r = 0; r < 5; ++r) buf.insert(buf.end(), {10.0f * r, 10.0f * r + 1, 10.0f * r + 2, -1.0f});
    Tensor table = make_tensor(buf, {5, 4}, dt).narrow(1, 0, 3);
    const Tensor out = ops::embedding(ctx, Tensor::from_vector<int64_t>({4, 0, 4, 2}), table);
    EXPECT_EQ(out.dtype(), dt);
    EXPECT_EQ(out.shape(), (Shape{4, 3}));
    EXPECT_EQ(to_floats(out), (std::vector<float>{40, 41, 42, 0, 1, 2, 40, 41, 42, 20, 21, 22}));
  }
}

TEST(Embedding, BitCopyAndIdShapes) {
  ForwardContext ctx;
  Tensor table = Tensor::empty({3, 2}, DType::kBF16);
  const uint16_t bits[6] = {0x7FC1, 0x8000, 0x3F80,
                            0xFF80, 0x0001, 0x7F7F};  // NaN payload, -0, 1, -inf, subnormal, max
  std::memcpy(table.data_ptr(), bits, sizeof(bits));
  const Tensor out = ops::embedding(ctx, Tensor::from_vector<int32_t>({2, 0, 1, 2}, {2, 2}), table);
  EXPECT_EQ(out.shape(), (Shape{2, 2, 2}));
  const uint16_t expected[8] = {0x0001, 0x7F7F, 0x7FC1, 0x8000, 0x3F80, 0xFF80, 0x0001, 0x7F7F};
  EXPECT_EQ(std::memcmp(out.data_ptr(), expected, sizeof(expected)), 0);
}

TEST(Embedding, VocabParallelShardMasksOtherRanks) {
  // Rank 1 of 2 over a vocabulary of 7: rows for ids [4, 8) (id 7 is padding of the padded vocab).
  ForwardContext ctx;
  Tensor shard = make_tensor({40, 41, 50, 51, 60, 61, 70, 71}, {4, 2});
  ops::EmbeddingOptions o;
  o.vocab_start = 4;
  o.vocab_size = 7;
  o.out = Tensor::empty({5, 2}, DType::kF32);
  const Tensor out = ops::embedding(ctx, Tensor::from_vector<int64_t>({0, 4, 6, 3, 5}), shard, o);
  EXPECT_EQ(out.data_ptr(), o.out.data_ptr());
  EXPECT_EQ(to_floats(out), (std::vector<float>{0, 0, 40, 41, 60, 61, 0, 0, 50, 51}));
  o.out = Tensor();
  expect_invalid([&] { ops::embedding(ctx, Tensor::from_vector<int64_t>({7}), shard, o); },
                 "embedding: ids[0] = 7 is outside the vocabulary [0, 7)");
}

TEST(Embedding, EmptyAndErrors) {
  ForwardContext ctx;
  Tensor table = make_tensor({1, 2, 3, 4}, {2, 2}, DType::kF16);
  EXPECT_EQ(ops::embedding(ctx, Tensor::from_vector<int64_t>({}), table).shape(), (Shape{0, 2}));
  expect_invalid(
      [&] {
        ops::embedding(ctx, Tensor::from_vector<int64_t>({0, 2}), table);
      },
      "embedding: ids[1] = 2 is outside the vocabulary [0, 2)");
  expect_invalid([&] { ops::embedding(ctx, Tensor::from_vector<int32_t>({-1}), table); },
                 "embedding: ids[0] = -1 is outside the vocabulary [0, 2)");
  expect_invalid([&] { ops::embedding(ctx, Tensor::from_vector<float>({0}), table); },
                 "embedding: `ids` must be a contiguous i32 or i64 tensor, got f32[1] on cpu");
  expect_invalid(
      [&] {
        ops::embedding(ctx, Tensor::from_vector<int64_t>({0}), Tensor::empty({2, 2}, DType::kE4M3FN));
      },
      "embedding: `table` must be f32, f16 or bf16, got e4m3fn[2, 2] on cpu");
  expect_invalid([&] { ops::embedding(ctx, Tensor::from_vector<int64_t>({0}), table.t()); },
                 "embedding: the last dimension of `table` must be contiguous, got strides [1, 2]");
  ops::EmbeddingOptions o;
  o.vocab_start = -1;
  expect_invalid([&] { ops::embedding(ctx, Tensor::from_vector<int64_t>({0}), table, o); },
                 "embedding: `vocab_start` must be non-negative, got -1");
  o = {};
  o.out = Tensor::empty({1, 2}, DType::kBF16);
  expect_invalid([&] { ops::embedding(ctx, Tensor::from_vector<int64_t>({0}), table, o); },
                 "embedding: `out` must be f16, got bf16[1, 2] on cpu");
  expect_error([&] { ops::embedding(ctx, ops_test::fake_cuda_tensor({1}, DType::kI64), table); },
               ErrorCode::kInvalidArgument, "embedding: `ids` is on cuda:0 but the context is on cpu");
  ForwardContext cuda_ctx(Device::cuda(0));
  expect_error(
      [&] {
        ops::embedding(cuda_ctx, ops_test::fake_cuda_tensor({1}, DType::kI64),
                       ops_test::fake_cuda_tensor({2, 2}, DType::kF16));
      },
      ErrorCode::kUnsupported, "embedding: no CUDA kernel yet");
}

}  // namespace
}  // namespace fp8kit
