// rms_norm / fused_add_rms_norm on the CPU (src/ops/norm/): hand-computed f32 values, a bf16 row
// where the kernel's two roundings T(T(x r) w) differ from one rounding of x r w (found with numpy
// and ml_dtypes), the residual rounded to the dtype before the norm reads it, random rows against
// a scalar loop written here, strided and N-D inputs, empty inputs and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "expect_error.h"
#include "fp8kit/ops/norm.h"
#include "fp8kit/platform.h"
#include "ops_test_util.h"
#include "reference_context.h"

namespace fp8kit {
namespace {

using ops_test::make_tensor;
using ops_test::to_floats;
using testing::expect_error;
using testing::expect_invalid;

// The scalar rule, written independently: r = 1 / sqrt(mean(x^2) + eps) in double rounded to
// f32, y = T(T(x r) w).
std::vector<float> expected_row(const std::vector<float>& x, const std::vector<float>& w, float eps, DType dt) {
  double ss = 0;
  for (float v : x) ss += double(v) * double(v);
  const float r = float(1.0 / std::sqrt(ss / double(x.size()) + double(eps)));
  std::vector<float> y;
  for (size_t i = 0; i < x.size(); ++i) y.push_back(ops_test::round_to(ops_test::round_to(x[i] * r, dt) * w[i], dt));
  return y;
}

TEST(RmsNorm, HandComputedF32) {
  // x = (3, 4): mean of squares 12.5, r = 1 / sqrt(12.5) = 0.28284271.. -> f32 0x1.21a186p-2;
  // y = (3 r, (4 r) * 2) = (0x1.b27248p-1, 0x1.21a186p+1) (numpy float32).
  ForwardContext ctx;
  const Tensor y = ops::rms_norm(ctx, make_tensor({3, 4}, {1, 2}), make_tensor({1, 2}, {2}), 0.0f);
  EXPECT_EQ(to_floats(y), (std::vector<float>{0x1.b27248p-1f, 0x1.21a186p+1f}));
}

TEST(RmsNorm, Bf16RoundsTheNormalizedValueBeforeTheWeight) {
  // r = 0x1.7ba7a2p+1. T(T(x r) w) = (-0.19921875, -0.1416015625, 2.484375, 0.29296875); one
  // rounding of x r w would give -0.2001953125 and 0.294921875 for the first and last.
  ForwardContext ctx;
  const std::vector<float> x = {0.1259765625f, -0.1318359375f, 0.640625f, 0.10498046875f};
  const std::vector<float> w = {-0.53515625f, 0.361328125f, 1.3046875f, 0.9453125f};
  const Tensor y = ops::rms_norm(ctx, make_tensor(x, {1, 4}, DType::kBF16), make_tensor(w, {4}, DType::kBF16), 1e-6f);
  EXPECT_EQ(to_floats(y), (std::vector<float>{-0.19921875f, -0.1416015625f, 2.484375f, 0.29296875f}));
}

TEST(RmsNorm, RandomRowsEveryDtypeStridedAndNd) {
  ForwardContext ctx;
  for (DType dt : ops_test::kFloatDTypes) {
    for (int64_t hidden : {1, 3, 127, 129, 4096}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " hidden " + std::to_string(hidden));
      const int64_t rows = 5;
      // Rows of a wider buffer (row stride hidden + 7), as a [rows, hidden] view.
      std::vector<float> buf = ops_test::normal_values(size_t(rows * (hidden + 7)), uint32_t(hidden), 2.0f);
      std::vector<float> w = ops_test::normal_values(size_t(hidden), 99);
      Tensor xb = make_tensor(buf, {rows, hidden + 7}, dt);
      Tensor x = xb.narrow(1, 0, hidden);
      Tensor wt = make_tensor(w, {hidden}, dt);
      const std::vector<float> got = to_floats(ops::rms_norm(ctx, x, wt, 1e-5f));
      const std::vector<float> xs = to_floats(x), ws = to_floats(wt);
      for (int64_t r = 0; r < rows; ++r) {
        const std::vector<float> row(xs.begin() + r * hidden, xs.begin() + (r + 1) * hidden);
        const auto exp = expected_row(row, ws, 1e-5f, dt);
        for (int64_t i = 0; i < hidden; ++i) ASSERT_EQ(got[size_t(r * hidden + i)], exp[size_t(i)]) << r << " " << i;
      }
      // The same rows as a [1, rows, hidden] tensor and through a preallocated output.
      Tensor out = Tensor::empty({1, rows, hidden}, dt);
      const Tensor y3 = ops::rms_norm(ctx, x.contiguous().view({1, rows, hidden}), wt, 1e-5f, out);
      EXPECT_EQ(y3.data_ptr(), out.data_ptr());
      EXPECT_EQ(to_floats(y3), got);
    }
  }
}

TEST(RmsNorm, NonCollapsibleRowsAreCopied) {
  ForwardContext ctx;
  Tensor base = make_tensor(ops_test::normal_values(2 * 3 * 8, 5), {2, 3, 8}, DType::kF32);
  Tensor x = base.transpose(0, 1);  // [3, 2, 8]: rows not evenly strided
  Tensor w = make_tensor(std::vector<float>(8, 1.5f), {8});
  EXPECT_EQ(to_floats(ops::rms_norm(ctx, x, w, 1e-6f)), to_floats(ops::rms_norm(ctx, x.contiguous(), w, 1e-6f)));
}

TEST(RmsNorm, ZerosEmptyAndNaN) {
  ForwardContext ctx;
  Tensor w = make_tensor({1, 1}, {2});
  // A zero row with eps > 0 stays zero; with eps = 0 it is 0 * inf = NaN.
  EXPECT_EQ(to_floats(ops::rms_norm(ctx, make_tensor({0, 0}, {1, 2}), w, 1e-6f)), (std::vector<float>{0, 0}));
  for (float v : to_floats(ops::rms_norm(ctx, make_tensor({0, 0}, {1, 2}), w, 0.0f))) EXPECT_TRUE(std::isnan(v));
  // A NaN poisons its row only.
  const auto y = to_floats(ops::rms_norm(ctx, make_tensor({std::nanf(""), 1, 3, 4}, {2, 2}), w, 1e-6f));
  EXPECT_TRUE(std::isnan(y[0]) && std::isnan(y[1]));
  EXPECT_TRUE(std::isfinite(y[2]) && std::isfinite(y[3]));
  EXPECT_EQ(
      ops::rms_norm(ctx, Tensor::empty({0, 2}, DType::kBF16), make_tensor({1, 1}, {2}, DType::kBF16), 1e-6f).shape(),
      (Shape{0, 2}));
}

TEST(FusedAddRmsNorm, ResidualIsRoundedBeforeTheNorm) {
  // bf16: 256 + 1 = 257 is a tie between 256 and 258 and rounds to 256, so the residual stream
  // holds (256, 1) and the norm reads that, not (257, 1).
  ForwardContext ctx;
  Tensor x = make_tensor({256, 0}, {1, 2}, DType::kBF16);
  Tensor residual = make_tensor({1, 1}, {1, 2}, DType::kBF16);
  const std::vector<float> w = {1.0f, 3.0f};
  ops::fused_add_rms_norm(ctx, x, residual, make_tensor(w, {2}, DType::kBF16), 1e-6f);
  EXPECT_EQ(to_floats(residual), (std::vector<float>{256, 1}));
  EXPECT_EQ(to_floats(x), expected_row({256, 1}, w, 1e-6f, DType::kBF16));
  ASSERT_NE(expected_row({256, 1}, w, 1e-6f, DType::kBF16), expected_row({257, 1}, w, 1e-6f, DType::kBF16));
}

TEST(FusedAddRmsNorm, RandomRowsMatchAddThenNorm) {
  ForwardContext ctx;
  for (DType dt : ops_test::kFloatDTypes) {
    const int64_t rows = 7, hidden = 257;
    Tensor xb = make_tensor(ops_test::normal_values(size_t(rows * (hidden + 3)), 1), {rows, hidden + 3}, dt);
    Tensor x = xb.narrow(1, 1, hidden);  // strided rows, written in place
    Tensor residual = make_tensor(ops_test::normal_values(size_t(rows * hidden), 2, 4.0f), {rows, hidden}, dt);
    Tensor w = make_tensor(ops_test::normal_values(size_t(hidden), 3), {hidden}, dt);
    const std::vector<float> x0 = to_floats(x), r0 = to_floats(residual), ws = to_floats(w);
    const std::vector<float> pad_before = to_floats(xb.narrow(1, 0, 1));
    ops::fused_add_rms_norm(ctx, x, residual, w, 1e-6f);
    const std::vector<float> xs = to_floats(x), rs = to_floats(residual);
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> sum;
      for (int64_t i = 0; i < hidden; ++i) {
        sum.push_back(ops_test::round_to(x0[size_t(r * hidden + i)] + r0[size_t(r * hidden + i)], dt));
        ASSERT_EQ(rs[size_t(r * hidden + i)], sum.back());
      }
      const auto exp = expected_row(sum, ws, 1e-6f, dt);
      for (int64_t i = 0; i < hidden; ++i) ASSERT_EQ(xs[size_t(r * hidden + i)], exp[size_t(i)]);
    }
    EXPECT_EQ(to_floats(xb.narrow(1, 0, 1)), pad_before);  // the columns outside the view are untouched
  }
}

TEST(RmsNormCpu, FastRowsAreTheReferenceByteForByte) {
  // The fast backend's AVX2 rows (rms_norm_cpu.cpp) against the reference on rows around the
  // 8-lane step, many rows (split over the threads), extreme magnitudes, NaN and inf, both norms.
  Overrides fast_overrides;
  fast_overrides.cpu_backend = CpuBackend::kFast;
  const ForwardContext fast(Device::cpu(), fast_overrides);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (DType dt : ops_test::kFloatDTypes) {
    for (int64_t hidden : {1, 7, 8, 9, 576, 1000}) {
      for (int64_t rows : {1, 3, 200}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " hidden " + std::to_string(hidden) + " rows " + std::to_string(rows));
        std::vector<float> xs = ops_test::normal_values(size_t(rows * hidden), uint32_t(hidden + rows), 3.0f);
        if (rows == 3) {  // row 1: huge and tiny values; row 2: a NaN, and an inf where there is room
          for (int64_t i = 0; i < hidden; ++i) xs[size_t(hidden + i)] *= (i % 2 != 0) ? 1e30f : 1e-30f;
          xs[size_t(2 * hidden)] = nan;
          if (hidden > 1) xs[size_t(2 * hidden + 1)] = inf;
        }
        const Tensor w = make_tensor(ops_test::normal_values(size_t(hidden), 5), {hidden}, dt);
        const Tensor x = make_tensor(xs, {rows, hidden}, dt);
        const Tensor a = ops::rms_norm(fast, x, w, 1e-6f), b = ops::rms_norm(cpu_reference_ctx(), x, w, 1e-6f);
        ASSERT_EQ(std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()), 0);
        // fused_add_rms_norm: the residual stream and the output.
        const std::vector<float> rs = ops_test::normal_values(size_t(rows * hidden), 77, 2.0f);
        Tensor xf = make_tensor(xs, {rows, hidden}, dt), xr = make_tensor(xs, {rows, hidden}, dt);
        Tensor resf = make_tensor(rs, {rows, hidden}, dt), resr = make_tensor(rs, {rows, hidden}, dt);
        ops::fused_add_rms_norm(fast, xf, resf, w, 1e-5f);
        ops::fused_add_rms_norm(cpu_reference_ctx(), xr, resr, w, 1e-5f);
        ASSERT_EQ(std::memcmp(xf.data_ptr(), xr.data_ptr(), xf.nbytes()), 0);
        ASSERT_EQ(std::memcmp(resf.data_ptr(), resr.data_ptr(), resf.nbytes()), 0);
      }
    }
  }
}

TEST(RmsNorm, Errors) {
  ForwardContext ctx;
  Tensor x = make_tensor(std::vector<float>(6), {2, 3}, DType::kBF16);
  Tensor w = make_tensor(std::vector<float>(3), {3}, DType::kBF16);
  expect_invalid([&] { ops::rms_norm(ctx, x, make_tensor(std::vector<float>(3), {3}), 1e-6f); },
                 "rms_norm: `weight` must be a contiguous [3] tensor of x's dtype bf16, got f32[3] on cpu");
  expect_invalid([&] { ops::rms_norm(ctx, x, make_tensor(std::vector<float>(4), {4}, DType::kBF16), 1e-6f); },
                 "rms_norm: `weight` must be a contiguous [3] tensor of x's dtype bf16, got bf16[4] on cpu");
  expect_invalid([&] { ops::rms_norm(ctx, x, w, -1.0f); }, "rms_norm: `eps` must be finite and non-negative, got -1");
  expect_invalid([&] { ops::rms_norm(ctx, x, w, std::numeric_limits<float>::quiet_NaN()); },
                 "rms_norm: `eps` must be finite and non-negative, got nan");
  expect_invalid(
      [&] {
        ops::rms_norm(ctx, Tensor::empty({2, 3}, DType::kI32), w, 1e-6f);
      },
      "rms_norm: `x` must be f32, f16 or bf16, got i32[2, 3] on cpu");
  expect_invalid(
      [&] {
        ops::rms_norm(ctx, x, w, 1e-6f, Tensor::empty({2, 4}, DType::kBF16));
      },
      "rms_norm: `out` must have shape [2, 3], got bf16[2, 4] on cpu");
  expect_invalid([&] { ops::rms_norm(ctx, Tensor(), w, 1e-6f); }, "rms_norm: `x` is an undefined tensor");
  expect_invalid(
      [&] {
        ops::fused_add_rms_norm(ctx, x, make_tensor(std::vector<float>(6), {3, 2}, DType::kBF16), w, 1e-6f);
      },
      "fused_add_rms_norm: `residual` must have the dtype and shape of `x` (bf16[2, 3] on cpu), got bf16[3, 2] on cpu");
  expect_invalid(
      [&] {
        ops::fused_add_rms_norm(ctx, x, make_tensor(std::vector<float>(6), {3, 2}, DType::kBF16).t(), w, 1e-6f);
      },
      "fused_add_rms_norm: `residual` must be contiguous");
  Tensor xt = make_tensor(std::vector<float>(6), {3, 2}, DType::kBF16).t();
  expect_invalid([&] { ops::fused_add_rms_norm(ctx, xt, x, w, 1e-6f); },
                 "fused_add_rms_norm: `x` is written in place and needs a contiguous last dimension and evenly strided "
                 "rows, got strides [1, 2]");
  expect_error(
      [&] {
        ops::rms_norm(ctx, ops_test::fake_cuda_tensor({2, 3}, DType::kBF16), w, 1e-6f);
      },
      ErrorCode::kInvalidArgument, "rms_norm: `x` is on cuda:0 but the context is on cpu");
  if (!cuda_built()) {  // a CUDA build routes these to its kernel (tests/gpu/test_norm_rope_cuda.cpp)
    ForwardContext cuda_ctx(Device::cuda(0));
    expect_error(
        [&] {
          ops::rms_norm(cuda_ctx, ops_test::fake_cuda_tensor({2, 3}, DType::kBF16),
                        ops_test::fake_cuda_tensor({3}, DType::kBF16), 1e-6f);
        },
        ErrorCode::kUnsupported, "rms_norm: fp8kit was built without CUDA");
  }
}

}  // namespace
}  // namespace fp8kit
