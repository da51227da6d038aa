// core/checked_math.h and the checked shape arithmetic of Tensor: ceil_div exact up to INT64_MAX,
// overflow as an Error naming what overflowed, zero dimensions, and the weight ops with block
// sizes larger than the weight (one partial block, never a wrapped product).
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "core/checked_math.h"
#include "expect_error.h"
#include "fp8kit/ops/quant.h"
#include "fp8kit/tensor.h"
#include "test_context.h"

namespace fp8kit {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

TEST(CheckedMath, CeilDivIsExactUpToInt64Max) {
  EXPECT_EQ(ceil_div(0, 128), 0);
  EXPECT_EQ(ceil_div(1, 128), 1);
  EXPECT_EQ(ceil_div(128, 128), 1);
  EXPECT_EQ(ceil_div(129, 128), 2);
  EXPECT_EQ(ceil_div(256, kMax), 1);  // (a + b - 1) / b overflows here and gave 0
  EXPECT_EQ(ceil_div(kMax, kMax), 1);
  EXPECT_EQ(ceil_div(kMax, 128), kMax / 128 + 1);
  EXPECT_EQ(ceil_div(kMax, 1), kMax);
  testing::expect_invalid([] { checked_ceil_div(256, 0, "block_n"); }, "block_n: cannot divide 256 into blocks of 0");
  testing::expect_invalid([] { checked_ceil_div(-1, 128, "rows"); }, "rows: cannot divide -1 into blocks of 128");
}

TEST(CheckedMath, OverflowNamesWhatOverflowed) {
  EXPECT_EQ(checked_mul(int64_t(1) << 31, int64_t(1) << 31, "x"), int64_t(1) << 62);
  testing::expect_invalid([] { checked_mul(kMax, 2, "heads x head_dim"); },
                          "heads x head_dim: 9223372036854775807 x 2 overflows a 64-bit integer");
  testing::expect_invalid([] { checked_add(kMax, 1, "offset"); },
                          "offset: 9223372036854775807 + 1 overflows a 64-bit integer");
  EXPECT_EQ(checked_add(-5, 5, "x"), 0);
}

TEST(CheckedMath, NumelWithZeroDimensions) {
  EXPECT_EQ(checked_numel({}, "s"), 1);
  EXPECT_EQ(checked_numel({kMax, 0}, "s"), 0);
  EXPECT_EQ(checked_numel({0, int64_t(1) << 32, int64_t(1) << 30}, "s"), 0);
  testing::expect_invalid([] { checked_numel({0, int64_t(1) << 32, int64_t(1) << 32}, "shape"); },
                          "shape: 4294967296 x 4294967296 overflows a 64-bit integer");
  testing::expect_invalid([] { checked_numel({3, -1}, "shape"); }, "shape: negative dimension -1");
}

TEST(CheckedMath, TensorShapesThatOverflow) {
  testing::expect_invalid([] { shape_numel({int64_t(1) << 32, int64_t(1) << 32}); },
                          "shape [4294967296, 4294967296] has more elements than a 64-bit integer holds");
  EXPECT_EQ(shape_numel({kMax, 0}), 0);
  testing::expect_invalid([] { Tensor::empty({int64_t(1) << 62, 4}, DType::kF32); },
                          "shape [4611686018427387904, 4] has more elements than a 64-bit integer holds");
  testing::expect_invalid([] { Tensor::empty({int64_t(1) << 61, 2}, DType::kF32); },
                          "a f32 tensor of shape [2305843009213693952, 2] needs more bytes than a 64-bit size holds");
  EXPECT_EQ(Tensor::empty({kMax, 0}, DType::kBF16).numel(), 0);
}

// A block larger than the weight is one partial block: the same scales and codes as a block of
// the weight's own size, and no block product that wraps.
TEST(CheckedMath, WeightBlocksLargerThanTheWeight) {
  std::vector<float> values(6 * 10);
  for (size_t i = 0; i < values.size(); ++i) values[i] = float(i % 7) - 3.0f;
  const Tensor w = Tensor::from_vector(values, {6, 10});
  const ops::QuantResult whole = ops::quantize_weight_block(cpu_ctx(), w, 6, 10);
  const std::vector<std::pair<int64_t, int64_t>> blocks = {{kMax, kMax}, {kMax, 10}, {6, kMax}, {1 << 20, 1 << 20}};
  for (const auto& [bn, bk] : blocks) {
    const ops::QuantResult big = ops::quantize_weight_block(cpu_ctx(), w, bn, bk);
    ASSERT_EQ(big.scale.shape(), (Shape{1, 1})) << bn << "x" << bk;
    EXPECT_EQ(big.scale.data<float>()[0], whole.scale.data<float>()[0]);
    EXPECT_EQ(std::memcmp(big.q.data_ptr(), whole.q.data_ptr(), 60), 0);
    const Tensor back = ops::dequantize_weight(cpu_ctx(), big.q, big.scale, DType::kF32, std::make_pair(bn, bk));
    const Tensor ref =
        ops::dequantize_weight(cpu_ctx(), whole.q, whole.scale, DType::kF32, std::make_pair(int64_t(6), int64_t(10)));
    EXPECT_EQ(std::memcmp(back.data_ptr(), ref.data_ptr(), 60 * sizeof(float)), 0);
  }
  // No element, no block: an empty scale, nothing read.
  const ops::QuantResult empty = ops::quantize_weight_block(cpu_ctx(), Tensor::empty({kMax, 0}, DType::kBF16), 128, 128);
  EXPECT_EQ(empty.scale.shape(), (Shape{ceil_div(kMax, 128), 0}));
}

}  // namespace
}  // namespace fp8kit
