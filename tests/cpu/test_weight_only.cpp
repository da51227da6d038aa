// weight_only_mm on the CPU: a hand-computed case, every weight scaling against an fp64
// recomputation, b's two layouts, bias, and the errors.
#include <gtest/gtest.h>

#include "expect_error.h"
#include "test_context.h"
#include "fp8kit/ops/gemm.h"
#include "gemm_test_util.h"

namespace fp8kit {
namespace {

using namespace gemm_test;
using ops::WeightOnlyMmOptions;
using testing::expect_invalid;

Tensor bf16_from(const std::vector<float>& v, int64_t rows, int64_t cols) {
  Tensor t = Tensor::empty({rows, cols}, DType::kBF16);
  for (size_t i = 0; i < v.size(); ++i) t.data<BFloat16>()[i] = float_to_bf16(v[i]);
  return t;
}

TEST(WeightOnly, HandComputed) {
  // x = [[1, 2]], w = [[1, 0.5], [-2, 4]] with per-channel scales [2, 0.25]:
  // w_dq = [[2, 1], [-0.5, 1]], y = [1*2 + 2*1, 1*(-0.5) + 2*1] = [4, 1.5]; bias [1, -1].
  const Tensor x = bf16_from({1, 2}, 1, 2);
  const Tensor w = e4m3_from({1, 0.5f, -2, 4}, 2, 2);
  WeightOnlyMmOptions o;
  Tensor bias = Tensor::empty({2}, DType::kBF16);
  bias.data<BFloat16>()[0] = float_to_bf16(1);
  bias.data<BFloat16>()[1] = float_to_bf16(-1);
  o.bias = bias;
  const Tensor y = ops::weight_only_mm(cpu_ctx(), x, w, Tensor::from_vector(std::vector<float>{2, 0.25f}), o);
  EXPECT_EQ(bf16_to_float(y.data<BFloat16>()[0]), 5.0f);
  EXPECT_EQ(bf16_to_float(y.data<BFloat16>()[1]), 0.5f);
}

TEST(WeightOnly, EveryScalingMatchesFp64) {
  std::mt19937 rng(4);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t m = 5, n = 200, k = 320;
  std::vector<float> xv(m * k);
  for (float& v : xv) v = nd(rng);
  const Tensor x = bf16_from(xv, m, k);
  const Tensor w = random_e4m3(n, k, rng);
  struct Case {
    const char* name;
    Tensor scale;
    std::optional<std::pair<int64_t, int64_t>> block;
  };
  const std::vector<Case> cases = {{"tensor", random_scales({}, rng), std::nullopt},
                                   {"channel", random_scales({n, 1}, rng), std::nullopt},
                                   {"block 128x128", random_scales({2, 3}, rng), std::make_pair(128, 128)},
                                   {"block 64x32", random_scales({4, 10}, rng), std::make_pair(64, 32)}};
  for (const Case& c : cases) {
    WeightOnlyMmOptions o;
    o.block = c.block;
    const Tensor y = ops::weight_only_mm(cpu_ctx(), x, w, c.scale, o);
    const Tensor y_kn = ops::weight_only_mm(cpu_ctx(), x, w.t(), c.scale, o);  // the column-major view
    EXPECT_EQ(std::memcmp(y.data_ptr(), y_kn.data_ptr(), y.nbytes()), 0) << c.name;
    const auto* wq = static_cast<const uint8_t*>(w.data_ptr());
    double worst = 0;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t kk = 0; kk < k; ++kk) {
          const float scale = c.block ? c.scale.data<float>()[(j / c.block->first) * c.scale.size(1) + kk / c.block->second]
                                      : c.scale.data<float>()[c.scale.numel() == 1 ? 0 : j];
          s += double(bf16_to_float(x.data<BFloat16>()[i * k + kk])) * double(e4m3fn_bits_to_float(wq[j * k + kk])) * scale;
        }
        const double got = bf16_to_float(y.data<BFloat16>()[i * n + j]);
        worst = std::max(worst, std::abs(got - s) / (std::abs(s) + 1e-2));
      }
    }
    // bf16 output: half a bf16 ulp (2^-9 relative) plus float rounding of the scaled weights.
    EXPECT_TRUE(worst <= 4e-3) << c.name << " " << worst;
  }
}

TEST(WeightOnly, Errors) {
  const Tensor x = Tensor::zeros({2, 32}, DType::kBF16), w = Tensor::zeros({8, 32}, DType::kE4M3FN);
  expect_invalid([&] { ops::weight_only_mm(cpu_ctx(), Tensor::zeros({2, 32}, DType::kF32), w, Tensor::scalar_f32(1)); },
                 "weight_only_mm: `x` must be bf16 or f16, got f32[2, 32] on cpu");
  expect_invalid([&] { ops::weight_only_mm(cpu_ctx(), x, w, Tensor::zeros({3}, DType::kF32)); },
                 "weight_only_mm: `w_scale` must hold one scale, one per output channel ([N] or [N, 1], N = 8), or "
                 "block scales with options.block; got f32[3] on cpu");
  WeightOnlyMmOptions o;
  o.block = std::make_pair(128, 128);
  expect_invalid([&] { ops::weight_only_mm(cpu_ctx(), x, w, Tensor::zeros({2, 2}, DType::kF32), o); },
                 "weight_only_mm: `w_scale` must be [ceil(N / block_n), ceil(K / block_k)] = [1, 1], got f32[2, 2] on cpu");
}

}  // namespace
}  // namespace fp8kit
