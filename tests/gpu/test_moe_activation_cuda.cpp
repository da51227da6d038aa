// silu_and_mul / gelu_and_mul and moe_sum on the GPU against the CPU reference
// (src/ops/activation/activation_ref.cpp, src/ops/moe/moe_sum_ref.cpp): every dtype, ragged and
// vector-friendly widths, strided rows, poisoned outputs.
// moe_sum is bit-exact. The activations are bit-exact but for the f32 transcendental: the kernel
// gives the results of exp / erf evaluated in double and rounded to float (the correctly rounded
// value; SiLU takes a fast f32 path only where it yields the same result), glibc's
// expf / erff are within about 1 ulp of it, so an f32 activation may differ by one ulp; a 16-bit
// result then differs (by one ulp of T) only next to a rounding midpoint of T, and an f32 result
// by a few ulp. The checks allow exactly that: 16-bit results within 1 ulp of T on at most 0.1%
// of the elements, f32 results within 8 ulp on at most 5% (NaN must match NaN). One exception,
// measured on the H200: gelu's 1 + erf(x / sqrt 2) cancels for negative x, so one ulp of erf
// (2^-24 near -1) becomes many ulp of an f32 result; there an f32 element may also differ by up
// to 2^-22 * |0.5 * gate * up| (the one-ulp erf bound, with a factor 2 of margin).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "fp8kit/ops/moe_experts.h"
#include "gpu_test_util.h"

namespace fp8kit {
namespace {

using namespace gpu_test;

const Device kGpu = Device::cuda(0);

// Distance in units in the last place of the element type (ordered integer distance); a NaN on
// one side only counts as infinitely far.
int64_t ulp_distance(const Tensor& a, const Tensor& b, int64_t i) {
  auto ordered = [](int64_t bits, int width) {
    const int64_t sign = int64_t(1) << (width - 1);
    return (bits & sign) ? -(bits & (sign - 1)) : bits;
  };
  double fa = 0, fb = 0;
  int64_t ba = 0, bb = 0;
  int width = 32;
  switch (a.dtype()) {
    case DType::kBF16:
      width = 16, ba = a.data<BFloat16>()[i].bits, bb = b.data<BFloat16>()[i].bits;
      fa = bf16_to_float(a.data<BFloat16>()[i]), fb = bf16_to_float(b.data<BFloat16>()[i]);
      break;
    case DType::kF16:
      width = 16, ba = a.data<Float16>()[i].bits, bb = b.data<Float16>()[i].bits;
      fa = f16_to_float(a.data<Float16>()[i]), fb = f16_to_float(b.data<Float16>()[i]);
      break;
    default: {
      uint32_t ua, ub;
      std::memcpy(&ua, &a.data<float>()[i], 4);
      std::memcpy(&ub, &b.data<float>()[i], 4);
      ba = ua, bb = ub, fa = a.data<float>()[i], fb = b.data<float>()[i];
    }
  }
  if (std::isnan(fa) || std::isnan(fb)) return std::isnan(fa) && std::isnan(fb) ? 0 : std::numeric_limits<int64_t>::max();
  return std::abs(ordered(ba, width) - ordered(bb, width));
}

// gelu_x: the f32 input [rows, >= 2d] (row-major, any row stride) when gelu's erf bound applies.
void expect_within_ulp(const Case& c, const Tensor& got_dev, const Tensor& want, int64_t max_ulp, double max_fraction,
                       const Tensor& gelu_x = {}) {
  const Tensor got = to_host(got_dev);
  ASSERT_EQ(got.shape(), want.shape()) << c.str();
  const int64_t d_out = want.size(-1);
  int64_t differ = 0, worst = 0, first = -1;
  for (int64_t i = 0; i < want.numel(); ++i) {
    int64_t d = ulp_distance(got, want, i);
    if (d > max_ulp && gelu_x.defined() && d != std::numeric_limits<int64_t>::max()) {
      const float* row = gelu_x.data<float>() + (i / d_out) * gelu_x.stride(0);
      const double gate = row[i % d_out], up = row[d_out + i % d_out];
      const double bound = std::ldexp(std::abs(0.5 * gate * up), -22);
      if (std::abs(double(got.data<float>()[i]) - double(want.data<float>()[i])) <= bound) d = 1;  // within the erf bound
    }
    if (d != 0) {
      ++differ;
      if (first < 0) first = i;
    }
    worst = std::max(worst, d);
  }
  EXPECT_TRUE(worst <= max_ulp) << c.str() << ": worst distance " << worst << " ulp (allowed " << max_ulp
                                << "), first difference at " << first;
  EXPECT_TRUE(double(differ) <= max_fraction * double(want.numel()) + 1.0)
      << c.str() << ": " << differ << " of " << want.numel() << " elements differ";
}

Tensor activation(bool silu, const Tensor& x, Tensor out = {}) {
  return silu ? ops::silu_and_mul(ctx_of(x), x, std::move(out)) : ops::gelu_and_mul(ctx_of(x), x, std::move(out));
}

TEST(MoeActivationCuda, MatchesTheReference) {
  for (const bool silu : {true, false}) {
    for (const DType dtype : {DType::kBF16, DType::kF16, DType::kF32}) {
      for (const auto& [rows, d] : std::vector<std::pair<int64_t, int64_t>>{
               {1, 1}, {3, 7}, {129, 8}, {64, 64}, {1000, 768}, {17, 1031}, {4, 14336}}) {
        const uint32_t seed = next_seed();
        const Case c{silu ? "silu_and_mul" : "gelu_and_mul", {rows, 2 * d}, dtype, dtype, seed, ""};
        const Tensor x = random_tensor({rows, 2 * d}, dtype, seed, 3.0f);
        const Tensor want = activation(silu, x);
        const Tensor out = poisoned({rows, d}, dtype, kGpu, 0xFF);  // NaN in every dtype
        activation(silu, x.to(kGpu), out);
        const bool f32 = dtype == DType::kF32;
        expect_within_ulp(c, out, want, f32 ? 8 : 1, f32 ? 5e-2 : 1e-3, f32 && !silu ? x : Tensor());
      }
    }
  }
}

TEST(MoeActivationCuda, StridedRowsAndSpecialValues) {
  for (const bool silu : {true, false}) {
    for (const DType dtype : {DType::kBF16, DType::kF32}) {
      const uint32_t seed = next_seed();
      const int64_t rows = 33, d = 64;
      // Rows 2d + 16 apart (a narrowed view): the kernel reads them in place.
      Tensor base = random_tensor({rows, 2 * d + 16}, dtype, seed, 4.0f);
      const float specials[] = {0.0f, -0.0f, std::numeric_limits<float>::infinity(),
                                -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                                88.7f, -88.7f, 1e-30f, -104.0f, 30.0f};
      for (int i = 0; i < 10; ++i) store_float(base, i * 7, specials[i]);
      const Tensor x = base.narrow(1, 0, 2 * d);
      const Case c{silu ? "silu_and_mul (strided)" : "gelu_and_mul (strided)", x.shape(), dtype, dtype, seed, ""};
      const Tensor want = activation(silu, x);
      const Tensor got = activation(silu, device_view(base, x));
      const bool f32 = dtype == DType::kF32;
      expect_within_ulp(c, got, want, f32 ? 8 : 1, f32 ? 5e-2 : 1e-3, f32 && !silu ? base : Tensor());
    }
  }
}

TEST(MoeSumCuda, BitExactForEveryTopK) {
  for (const DType dtype : {DType::kBF16, DType::kF16, DType::kF32}) {
    for (const int64_t top_k : {1, 2, 3, 4, 5, 8, 9, 16}) {
      for (const auto& [m, d] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 7}, {129, 8}, {64, 2048}, {5, 1031}}) {
        const uint32_t seed = next_seed();
        const Case c{"moe_sum", {m, top_k, d}, dtype, dtype, seed, ""};
        const Tensor input = random_tensor({m, top_k, d}, dtype, seed);
        Tensor want = Tensor::empty({m, d}, dtype);
        ops::moe_sum(ctx_of(input), input, want);
        Tensor got = poisoned({m, d}, dtype, kGpu, 0xFF);
        ops::moe_sum(ctx_of(input.to(kGpu)), input.to(kGpu), got);
        expect_same_tensor(c, "out", to_host(got), want);
      }
    }
  }
}

}  // namespace
}  // namespace fp8kit
