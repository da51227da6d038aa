// ops::matmul_16bit on the CPU: hand-computed cases in bf16, f16 and f32, one rounding of the
// exact sum (a case where rounding through f32 first gives another answer), random shapes against
// an fp64 recomputation within half an output ulp, strided operands, and the argument errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "expect_error.h"
#include "reference_context.h"
#include "test_context.h"
#include "fp8kit/ops/gemm.h"
#include "test_linear_util.h"

namespace fp8kit {
namespace {

using linear_test::random_16bit;
using linear_test::read16;
using testing::expect_invalid;

Tensor make(const std::vector<float>& v, const Shape& shape, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype);
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == DType::kBF16) {
      t.data<BFloat16>()[i] = float_to_bf16(v[i]);
    } else if (dtype == DType::kF16) {
      t.data<Float16>()[i] = float_to_f16(v[i]);
    } else {
      t.data<float>()[i] = v[i];
    }
  }
  return t;
}

TEST(Matmul16, HandComputed) {
  // x = [[1, 2], [-1, 0.5]], w = [[3, 4], [0.25, -2]], bias [1, -1]:
  // y = [[1*3 + 2*4 + 1, 1*0.25 - 2*2 - 1], [-3 + 2 + 1, -0.25 - 1 - 1]] = [[12, -4.75], [0, -2.25]].
  for (DType dtype : {DType::kBF16, DType::kF16, DType::kF32}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor y = ops::matmul_16bit(cpu_ctx(), make({1, 2, -1, 0.5f}, {2, 2}, dtype), make({3, 4, 0.25f, -2}, {2, 2}, dtype),
                                       make({1, -1}, {2}, dtype));
    EXPECT_EQ(y.dtype(), dtype);
    EXPECT_EQ(y.shape(), (Shape{2, 2}));
    EXPECT_EQ(read16(y, 0), 12.0f);
    EXPECT_EQ(read16(y, 1), -4.75f);
    EXPECT_EQ(read16(y, 2), 0.0f);
    EXPECT_EQ(read16(y, 3), -2.25f);
    const Tensor no_bias = ops::matmul_16bit(cpu_ctx(), make({1, 2}, {1, 2}, dtype), make({3, 4}, {1, 2}, dtype), Tensor());
    EXPECT_EQ(read16(no_bias, 0), 11.0f);
  }
}

TEST(Matmul16, OneRoundingOfTheExactSum) {
  // 1 + 2^-8 + 2^-40 lies just above the bf16 midpoint between 1 and 1 + 2^-7: rounded once it
  // is 1 + 2^-7; rounded to f32 first (1 + 2^-8, a tie) and then to bf16 it would be 1.
  const Tensor x = make({1, 1, 1}, {1, 3}, DType::kBF16);
  const Tensor w = make({1, std::ldexp(1.0f, -8), std::ldexp(1.0f, -40)}, {1, 3}, DType::kBF16);
  EXPECT_EQ(read16(ops::matmul_16bit(cpu_reference_ctx(), x, w, Tensor()), 0), 1.0f + std::ldexp(1.0f, -7));
}

// Half an ulp of `v` in `dtype` (subnormals included).
double half_ulp(double v, DType dtype) {
  const int mantissa = dtype == DType::kBF16 ? 8 : dtype == DType::kF16 ? 11 : 24;
  const int min_exponent = dtype == DType::kF16 ? -14 : -126;
  const int e = v == 0 ? min_exponent : std::max(std::ilogb(v), min_exponent);
  return std::ldexp(1.0, e - mantissa);
}

TEST(Matmul16, RandomAgainstFp64) {
  std::mt19937 rng(42);
  for (DType dtype : {DType::kBF16, DType::kF16, DType::kF32}) {
    for (auto [m, n, k] : {std::tuple{1, 1, 1}, std::tuple{3, 127, 129}, std::tuple{17, 64, 256}}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " " << m << "x" << n << "x" << k);
      const Tensor x = random_16bit({m, k}, dtype, rng), w = random_16bit({n, k}, dtype, rng, 0.1f);
      const Tensor b = random_16bit({n}, dtype, rng);
      const Tensor y = ops::matmul_16bit(cpu_reference_ctx(), x, w, b);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double ref = read16(b, j);
          for (int64_t c = 0; c < k; ++c) ref += double(read16(x, i * k + c)) * read16(w, j * k + c);
          const double err = std::fabs(read16(y, i * n + j) - ref);
          EXPECT_TRUE(err <= half_ulp(ref, dtype) * (1 + 1e-9)) << i << "," << j << ": " << err;
        }
      }
    }
  }
}

TEST(Matmul16, StridedOperands) {
  std::mt19937 rng(43);
  const Tensor xs = random_16bit({4, 40}, DType::kBF16, rng), ws = random_16bit({6, 50}, DType::kBF16, rng);
  const Tensor x = xs.narrow(1, 5, 32), w = ws.narrow(1, 10, 32);  // row strides 40 and 50
  EXPECT_TRUE(linear_test::same_bits(ops::matmul_16bit(cpu_ctx(), x, w, Tensor()),
                                     ops::matmul_16bit(cpu_ctx(), x.contiguous(), w.contiguous(), Tensor())));
}

TEST(Matmul16, Errors) {
  const Tensor x = Tensor::zeros({2, 4}, DType::kBF16);
  expect_invalid([&] { ops::matmul_16bit(cpu_ctx(), x, Tensor::zeros({3, 4}, DType::kF16), Tensor()); },
                 "matmul_16bit: `w` must have x's dtype bf16, got f16[3, 4] on cpu");
  expect_invalid([&] { ops::matmul_16bit(cpu_ctx(), x, Tensor::zeros({3, 5}, DType::kBF16), Tensor()); },
                 "matmul_16bit: `w` must be [N, 4] with K contiguous, got bf16[3, 5] on cpu");
  expect_invalid([&] { ops::matmul_16bit(cpu_ctx(), x, Tensor::zeros({3, 4}, DType::kBF16), Tensor::zeros({3}, DType::kF32)); },
                 "matmul_16bit: `bias` must be a contiguous [N] = [3] tensor of x's dtype bf16, got f32[3] on cpu");
  expect_invalid([&] { ops::matmul_16bit(cpu_ctx(), Tensor::zeros({4}, DType::kBF16), x, Tensor()); },
                 "matmul_16bit: `x` must be 2-D, got bf16[4] on cpu");
  expect_invalid([&] { ops::matmul_16bit(cpu_ctx(), Tensor::zeros({2, 4}, DType::kE4M3FN), x, Tensor()); },
                 "matmul_16bit: `x` must be f32, f16 or bf16, got e4m3fn[2, 4] on cpu");
}

}  // namespace
}  // namespace fp8kit
