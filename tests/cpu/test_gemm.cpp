// scaled_mm on the CPU: hand-computed cases, exact results on integer grids with power-of-two
// scales, an fp64 reference with calibrated tolerance on random operands, a quality bound against
// the unquantized product, b's two layouts, every scaling, bias, output dtypes, and the errors.
#include <gtest/gtest.h>

#include "expect_error.h"
#include "reference_context.h"
#include "test_context.h"
#include "fp8kit/ops/gemm.h"
#include "fp8kit/ops/quant.h"
#include "gemm_test_util.h"

namespace fp8kit {
namespace {

using namespace gemm_test;
using ops::ScaledMmOptions;
using testing::expect_invalid;

TEST(GemmRef, HandComputedPerTensorWithBias) {
  // a = [[1, 2], [3, 4]], b (N x K) = [[1, 0], [0.5, -1]]: a b^T = [[1, -1.5], [3, -2.5]].
  const Tensor a = e4m3_from({1, 2, 3, 4}, 2, 2);
  const Tensor b = e4m3_from({1, 0, 0.5f, -1}, 2, 2);
  ScaledMmOptions o;
  o.out_dtype = DType::kF32;
  o.bias = Tensor::from_vector(std::vector<float>{10, 20});
  const Tensor y = ops::scaled_mm(cpu_ctx(), a, b, Tensor::scalar_f32(2.0f), Tensor::scalar_f32(0.5f), o);
  const std::vector<float> want = {11, 18.5f, 13, 17.5f};  // 2 * 0.5 * acc + bias
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y.data<float>()[i], want[i]) << i;
  o.fast_accum = true;  // a tensor-core option: the reference is exact either way
  const Tensor y_fast = ops::scaled_mm(cpu_ctx(), a, b, Tensor::scalar_f32(2.0f), Tensor::scalar_f32(0.5f), o);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y_fast.data<float>()[i], want[i]) << i;
}

TEST(GemmRef, HandComputedPerTokenPerChannel) {
  const Tensor a = e4m3_from({1, 2, 3, 4}, 2, 2);
  const Tensor b = e4m3_from({1, 0, 0.5f, -1}, 2, 2);
  ScaledMmOptions o;
  o.out_dtype = DType::kF32;
  const Tensor y = ops::scaled_mm(cpu_ctx(), a, b, Tensor::from_vector(std::vector<float>{1, 4}, {2, 1}),
                                  Tensor::from_vector(std::vector<float>{2, 8}), o);
  const std::vector<float> want = {2, -12, 24, -80};  // acc[i][j] * sa[i] * sb[j]
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y.data<float>()[i], want[i]) << i;
}

// Small integers, power-of-two scales: every partial sum is exact, so every backend must give
// exactly the integer result times the scales.
TEST(GemmRef, ExactOnIntegerGridsForEveryScaling) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> v(-3, 3), e(-4, 2);
  const int64_t m = 37, n = 129, k = 256;
  std::vector<float> av(m * k), bv(n * k);
  for (float& x : av) x = float(v(rng));
  for (float& x : bv) x = float(v(rng));
  const Tensor a = e4m3_from(av, m, k), b = e4m3_from(bv, n, k);
  auto pow2 = [&](const Shape& shape) {
    Tensor t = Tensor::empty(shape, DType::kF32);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = std::ldexp(1.0f, e(rng));
    return t;
  };
  struct Case {
    const char* name;
    Tensor sa, sb;
    std::optional<std::pair<int64_t, int64_t>> block;
  };
  const std::vector<Case> cases = {{"tensor", pow2({}), pow2({}), std::nullopt},
                                   {"token x tensor", pow2({m, 1}), pow2({1}), std::nullopt},
                                   {"tensor x channel", pow2({1}), pow2({n}), std::nullopt},
                                   {"token x channel", pow2({m}), pow2({n, 1}), std::nullopt},
                                   {"block 128x128", pow2({m, k / 128}), pow2({2, k / 128}), std::make_pair(128, 128)},
                                   {"block 64x64", pow2({m, k / 64}), pow2({3, k / 64}), std::make_pair(64, 64)}};
  for (const Case& c : cases) {
    for (DType out : {DType::kF32, DType::kBF16, DType::kF16}) {
      ScaledMmOptions o;
      o.out_dtype = out;
      o.block = c.block;
      const Tensor y = ops::scaled_mm(cpu_ctx(), a, b, c.sa, c.sb, o);
      const int64_t bk = c.block ? c.block->second : k, bn = c.block ? c.block->first : 1;
      auto sa = [&](int64_t i, int64_t kb) {
        return c.block ? c.sa.data<float>()[i * (k / bk) + kb] : c.sa.data<float>()[c.sa.numel() == 1 ? 0 : i];
      };
      auto sb = [&](int64_t j, int64_t kb) {
        return c.block ? c.sb.data<float>()[(j / bn) * (k / bk) + kb] : c.sb.data<float>()[c.sb.numel() == 1 ? 0 : j];
      };
      const std::vector<double> ref = reference_fp64(a, b, bk, sa, sb, {});
      int64_t bad = 0;
      for (int64_t i = 0; i < m * n; ++i) {
        const float want = out == DType::kF32    ? float(ref[i])
                           : out == DType::kBF16 ? bf16_to_float(float_to_bf16(float(ref[i])))
                                                 : f16_to_float(float_to_f16(float(ref[i])));
        bad += read_out(y, i) == want ? 0 : 1;
      }
      EXPECT_EQ(bad, 0) << c.name << " out " << dtype_name(out);
    }
  }
}

// Random operands over the e4m3 range: the only rounding left is the float accumulation and the
// epilogue, so the error relative to fp64 is a few float ulps: the largest seen over 20 seeds of
// these shapes was 1.5e-7, so 1e-5 leaves a ~70x margin and still catches any dropped or doubled
// term.
TEST(GemmRef, MatchesFp64OnRandomOperands) {
  for (uint32_t seed = 0; seed < 4; ++seed) {
    std::mt19937 rng(seed);
    for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{{1, 1, 1}, {3, 127, 129}, {129, 3, 640}, {16, 256, 4096}}) {
      const Tensor a = random_e4m3(m, k, rng), b = random_e4m3(n, k, rng);
      const Tensor sa = random_scales({m, 1}, rng), sb = random_scales({n}, rng);
      ScaledMmOptions o;
      o.out_dtype = DType::kF32;
      const Tensor y = ops::scaled_mm(cpu_reference_ctx(), a, b, sa, sb, o);
      const std::vector<double> ref = reference_fp64(
          a, b, k, [&](int64_t i, int64_t) { return sa.data<float>()[i]; },
          [&](int64_t j, int64_t) { return sb.data<float>()[j]; }, {});
      const double err = max_rel_error(y, ref, 1e-3 * std::sqrt(double(k)));
      EXPECT_TRUE(err <= 1e-5) << "seed " << seed << " m,n,k " << m << "," << n << "," << k << " err " << err;
    }
  }
}

TEST(GemmRef, BlockScalingMatchesFp64AndScaleLayoutsAgree) {
  std::mt19937 rng(11);
  const int64_t m = 5, n = 300, k = 384;
  const Tensor a = random_e4m3(m, k, rng), b = random_e4m3(n, k, rng);
  const Tensor sa = random_scales({m, 3}, rng), sb = random_scales({3, 3}, rng);
  ScaledMmOptions o;
  o.out_dtype = DType::kF32;
  o.block = std::make_pair(128, 128);
  const Tensor y = ops::scaled_mm(cpu_reference_ctx(), a, b, sa, sb, o);
  const std::vector<double> ref = reference_fp64(
      a, b, 128, [&](int64_t i, int64_t kb) { return sa.data<float>()[i * 3 + kb]; },
      [&](int64_t j, int64_t kb) { return sb.data<float>()[(j / 128) * 3 + kb]; }, {});
  EXPECT_TRUE(max_rel_error(y, ref, 0.05) <= 1e-5);
  // The same scales stored column-major ([K/128, M] viewed as [M, K/128]) give the same bits.
  Tensor col = Tensor::empty({3, m}, DType::kF32);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t g = 0; g < 3; ++g) col.data<float>()[g * m + i] = sa.data<float>()[i * 3 + g];
  }
  const Tensor y2 = ops::scaled_mm(cpu_reference_ctx(), a, b, col.t(), sb, o);
  EXPECT_EQ(std::memcmp(y.data_ptr(), y2.data_ptr(), y.nbytes()), 0);
}

TEST(GemmRef, ColumnMajorWeightViewEqualsNK) {
  std::mt19937 rng(3);
  const Tensor a = random_e4m3(7, 96, rng), b = random_e4m3(40, 96, rng);
  const Tensor sa = random_scales({}, rng), sb = random_scales({}, rng);
  const Tensor kn = b.t();  // [K, N] with strides (1, K): the spec's weight.t() after loading
  const Tensor y1 = ops::scaled_mm(cpu_ctx(), a, b, sa, sb), y2 = ops::scaled_mm(cpu_ctx(), a, kn, sa, sb);
  EXPECT_EQ(std::memcmp(y1.data_ptr(), y2.data_ptr(), y1.nbytes()), 0);
}

TEST(GemmRef, NaNInputPropagatesAndFailsTolerance) {
  Tensor a = e4m3_from({1, 2, 3, 4}, 2, 2);
  static_cast<uint8_t*>(a.data_ptr())[0] = 0x7f;  // NaN
  const Tensor b = e4m3_from({1, 0, 0, 1}, 2, 2);
  ScaledMmOptions o;
  o.out_dtype = DType::kF32;
  const Tensor y = ops::scaled_mm(cpu_ctx(), a, b, Tensor::scalar_f32(1), Tensor::scalar_f32(1), o);
  EXPECT_TRUE(std::isnan(y.data<float>()[0]));
  EXPECT_FALSE(max_rel_error(y, {1, 2, 3, 4}, 1.0) <= 1.0);  // a NaN never passes
}

// Quantized with fp8kit's own ops and multiplied, a bf16-valued problem stays within the error
// FP8 (3 mantissa bits) allows against the unquantized product.
TEST(GemmRef, QualityAgainstUnquantizedProduct) {
  std::mt19937 rng(21);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t m = 64, n = 96, k = 512;
  Tensor x = Tensor::empty({m, k}, DType::kBF16), w = Tensor::empty({n, k}, DType::kBF16);
  for (int64_t i = 0; i < m * k; ++i) x.data<BFloat16>()[i] = float_to_bf16(nd(rng));
  for (int64_t i = 0; i < n * k; ++i) w.data<BFloat16>()[i] = float_to_bf16(0.02f * nd(rng));
  std::vector<double> exact(m * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t kk = 0; kk < k; ++kk) s += double(bf16_to_float(x.data<BFloat16>()[i * k + kk])) * bf16_to_float(w.data<BFloat16>()[j * k + kk]);
      exact[i * n + j] = s;
    }
  }
  auto rel_fro = [&](const Tensor& y) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < m * n; ++i) {
      num += std::pow(double(read_out(y, i)) - exact[i], 2);
      den += exact[i] * exact[i];
    }
    return std::sqrt(num / den);
  };
  ops::ScaledFp8QuantOptions per_token;
  per_token.use_per_token_if_dynamic = true;
  const ops::QuantResult xq = ops::scaled_fp8_quant(cpu_ctx(), x, per_token);
  const ops::QuantResult wq = ops::quantize_weight_per_channel(cpu_ctx(), w);
  ScaledMmOptions o;
  o.out_dtype = DType::kF32;
  const double e1 = rel_fro(ops::scaled_mm(cpu_ctx(), xq.q, wq.q, xq.scale, wq.scale, o));
  ops::PerTokenGroupQuantOptions groups;
  groups.group_size = 128;
  const ops::QuantResult xg = ops::per_token_group_quant(cpu_ctx(), x, groups);
  const ops::QuantResult wb = ops::quantize_weight_block(cpu_ctx(), w, 128, 128);
  o.block = std::make_pair(128, 128);
  const double e2 = rel_fro(ops::scaled_mm(cpu_ctx(), xg.q, wb.q, xg.scale, wb.scale, o));
  // Each operand carries a few percent of rounding error per element, and the errors of a K-term
  // dot product partly cancel: measured 0.037 for both schemes with this seed; 0.06 is the bound.
  RecordProperty("per_token_error", std::to_string(e1));
  RecordProperty("block_error", std::to_string(e2));
  EXPECT_TRUE(e1 <= 0.06) << e1;
  EXPECT_TRUE(e2 <= 0.06) << e2;
  EXPECT_TRUE(e1 > 0.001) << "suspiciously exact: " << e1;
}

TEST(GemmRef, Errors) {
  const Tensor a = Tensor::zeros({4, 32}, DType::kE4M3FN), b = Tensor::zeros({8, 32}, DType::kE4M3FN);
  const Tensor s = Tensor::scalar_f32(1);
  expect_invalid([&] { ops::scaled_mm(cpu_ctx(), Tensor::zeros({4, 32}, DType::kBF16), b, s, s); },
                 "scaled_mm: `a` and `b` must be e4m3fn, got bf16[4, 32] on cpu and e4m3fn[8, 32] on cpu");
  expect_invalid([&] { ops::scaled_mm(cpu_ctx(), a, Tensor::zeros({8, 16}, DType::kE4M3FN), s, s); },
                 "scaled_mm: `b` must be [N, 32] with K contiguous, or its [32, N] column-major view; got e4m3fn[8, 16] "
                 "on cpu with strides [16, 1]");
  expect_invalid([&] { ops::scaled_mm(cpu_ctx(), a, b, Tensor::zeros({3}, DType::kF32), s); },
                 "scaled_mm: `scale_a` must hold one scale or one per row of a (M) (a (M) = 4) contiguously, got f32[3] "
                 "on cpu");
  expect_invalid([&] { ops::scaled_mm(cpu_ctx(), a, b, s, Tensor::zeros({1}, DType::kF16)); },
                 "scaled_mm: `scale_b` must be f32, got f16[1] on cpu");
  ScaledMmOptions o;
  o.bias = Tensor::zeros({8}, DType::kF32);
  expect_invalid([&] { ops::scaled_mm(cpu_ctx(), a, b, s, s, o); },
                 "scaled_mm: `bias` must be a contiguous [N] = [8] tensor of the output dtype bf16, got f32[8] on cpu");
  ScaledMmOptions blk;
  blk.block = std::make_pair(128, 128);
  expect_invalid([&] { ops::scaled_mm(cpu_ctx(), a, b, s, s, blk); },
                 "scaled_mm: K = 32 must be divisible by block_k = 128 (activations are quantized in 1 x 128 groups)");
  blk.block = std::make_pair(16, 16);
  expect_invalid([&] { ops::scaled_mm(cpu_ctx(), a, b, Tensor::zeros({4, 1}, DType::kF32), s, blk); },
                 "scaled_mm: `scale_a` must be [M, K / block_k] = [4, 2], got f32[4, 1] on cpu");
  ScaledMmOptions bad_out;
  bad_out.out_dtype = DType::kE4M3FN;
  expect_invalid([&] { ops::scaled_mm(cpu_ctx(), a, b, s, s, bad_out); }, "scaled_mm: `out_dtype` must be bf16, f16 or f32, got e4m3fn");
}

}  // namespace
}  // namespace fp8kit
