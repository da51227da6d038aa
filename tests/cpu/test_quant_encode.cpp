// The branch-free element steps of src/ops/quant/quant_encode.h against the scalar definitions
// they replace: every f16/bf16 input, every fp8 rounding boundary, and a dense sample of floats.
// (An exhaustive run over all 2^32 floats for MAX = 448 and 224 found only signalling NaNs
// differing, where glibc's fminf returns NaN but CUDA's, which the spec follows, returns MAX; the
// ops never see a signalling NaN, since v = x * inv or x / s quiets it.) Also the division by a
// scale through its reciprocal that the CUDA kernels use, against x / s.
#include "ops/quant/quant_encode.h"
#include "test_quant_util.h"

namespace fp8kit {
namespace {

using namespace quant_test;

uint8_t fast_cvt(float v, DType fp8) {
  return fp8 == DType::kE4M3FNUZ ? ops::quantize_fp8<E4M3FNUZFormat>(v, 224.0f)
                                 : ops::quantize_fp8<E4M3FNFormat>(v, 448.0f);
}

TEST(QuantEncode, LoadFloatMatchesEveryHalfAndBFloat16) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f16 = ops::load_float(Float16{uint16_t(h)});
    const float f16_ref = f16_to_float(Float16{uint16_t(h)});
    if (std::isnan(f16_ref)) {  // NaN payloads may come out quieted
      ASSERT_TRUE(std::isnan(f16)) << std::hex << h;
      ASSERT_EQ(std::signbit(f16), std::signbit(f16_ref)) << std::hex << h;
    } else {
      ASSERT_EQ(float_to_bits(f16), float_to_bits(f16_ref)) << std::hex << h;
    }
    const float b = ops::load_float(BFloat16{uint16_t(h)});
    ASSERT_EQ(float_to_bits(b), uint32_t(h) << 16) << std::hex << h;
  }
}

TEST(QuantEncode, AbsBitsIsAbsMaxIgnoringNaN) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f16 = f16_to_float(Float16{uint16_t(h)});
    const float bf = bf16_to_float(BFloat16{uint16_t(h)});
    const float f16_abs = ops::abs_bits_to_float(ops::abs_bits(Float16{uint16_t(h)}), Float16{});
    const float bf_abs = ops::abs_bits_to_float(ops::abs_bits(BFloat16{uint16_t(h)}), BFloat16{});
    // fmaxf(0, |x|) as CUDA computes it: a NaN contributes 0 (glibc's fmaxf would return NaN for a
    // signalling one, which these 16-bit NaN payloads widen to).
    auto expected = [](float x) { return float_to_bits(std::isnan(x) ? 0.0f : std::fabs(x)); };
    ASSERT_EQ(float_to_bits(f16_abs), expected(f16)) << std::hex << h;
    ASSERT_EQ(float_to_bits(bf_abs), expected(bf)) << std::hex << h;
    ASSERT_EQ(float_to_bits(ops::abs_bits_to_float(ops::abs_bits(bf), 0.0f)), expected(bf)) << std::hex << h;
  }
}

TEST(QuantEncode, QuantizeMatchesSpecOnEveryBFloat16Value) {
  for (DType fp8 : {DType::kE4M3FN, DType::kE4M3FNUZ}) {
    for (uint32_t h = 0; h < 0x10000; ++h) {
      const float v = bf16_to_float(BFloat16{uint16_t(h)});
      if (std::isnan(v) && (h & 0x40u) == 0) continue;  // signalling NaN: see the header comment
      ASSERT_EQ(fast_cvt(v, fp8), spec_cvt(v, fp8)) << dtype_name(fp8) << " " << std::hex << h;
    }
  }
}

// Every fp8 value and every midpoint between neighbours, and a few float ulps either side: the
// places where round-to-nearest-even and the clamp decide.
TEST(QuantEncode, QuantizeMatchesSpecAtEveryRoundingBoundary) {
  for (DType fp8 : {DType::kE4M3FN, DType::kE4M3FNUZ}) {
    std::vector<float> grid;
    for (int c = 0; c < 0x80; ++c) {
      const float v = decode(fp8, uint8_t(c));
      if (std::isfinite(v)) grid.push_back(v);
    }
    grid.push_back(2.0f * grid.back());  // beyond the largest value
    std::vector<float> points;
    for (size_t i = 0; i + 1 < grid.size(); ++i) {
      points.push_back(grid[i]);
      points.push_back(0.5f * (grid[i] + grid[i + 1]));  // exact: neighbours differ by few bits
    }
    for (float p : points) {
      for (int d = -3; d <= 3; ++d) {
        const float v = bits_to_float(uint32_t(int32_t(float_to_bits(p)) + d));
        for (float s : {v, -v}) ASSERT_EQ(fast_cvt(s, fp8), spec_cvt(s, fp8)) << dtype_name(fp8) << " " << s;
      }
    }
  }
}

TEST(QuantEncode, QuantizeMatchesSpecOnDenseFloatSample) {
  // Every 97th float bit pattern (all exponents, signs, NaN payloads, subnormals).
  for (uint64_t b = 0; b <= 0xffffffffull; b += 97) {
    const float v = bits_to_float(uint32_t(b));
    if (std::isnan(v) && (b & 0x400000u) == 0) continue;  // signalling NaN
    ASSERT_EQ(fast_cvt(v, DType::kE4M3FN), spec_cvt(v, DType::kE4M3FN)) << std::hex << b;
    ASSERT_EQ(fast_cvt(v, DType::kE4M3FNUZ), spec_cvt(v, DType::kE4M3FNUZ)) << std::hex << b;
  }
}

// divide_with_reciprocal(x, s, 1 / s) must quantize exactly as x / s; where |x / s| >= 2^-12
// (every quotient that can give a nonzero code) the quotients themselves must be equal.
void expect_division_matches(float x, float s) {
  const float z = 1.0f / s;
  ASSERT_TRUE(ops::divisor_is_regular(s, z, std::fabs(x))) << x << " / " << s;
  const float got = ops::divide_with_reciprocal(x, s, z), want = x / s;
  if (std::fabs(want) >= 0x1p-12f || std::isnan(want)) {
    ASSERT_EQ(float_to_bits(got), float_to_bits(want)) << std::hexfloat << x << " / " << s;
  } else {
    ASSERT_EQ(fast_cvt(got, DType::kE4M3FN), fast_cvt(want, DType::kE4M3FN)) << std::hexfloat << x << " / " << s;
    ASSERT_EQ(fast_cvt(got, DType::kE4M3FNUZ), fast_cvt(want, DType::kE4M3FNUZ)) << std::hexfloat << x << " / " << s;
  }
}

TEST(QuantEncode, DivisionThroughTheReciprocalIsDivision) {
  // Divisors with awkward significands (1, 1 + ulp, all ones, 1.5, 7/4 - ulp) and a real per-token
  // floor, times every 8th dividend significand in two binades, with both signs.
  const float divisors[] = {1.0f,
                            0x1.000002p0f,
                            0x1.fffffep0f,
                            1.5f,
                            0x1.bffffep0f,
                            3.0f / 448.0f,
                            1.0f / (448.0f * 512.0f),
                            0x1.234568p-20f,
                            0x1.fffffep40f};
  for (float s : divisors) {
    for (uint32_t m = 0; m < (1u << 23); m += 8) {
      const float x = bits_to_float(0x3f800000u | m);
      expect_division_matches(x, s);
      expect_division_matches(-2.0f * x, s);
    }
  }
  // Random dividends and divisors over the whole range the kernels take this path for.
  std::mt19937 rng(12345);
  std::uniform_int_distribution<uint32_t> mantissa(0, (1u << 23) - 1);
  std::uniform_int_distribution<int> s_exp(-60, 59), x_exp(-140, 60);
  for (int i = 0; i < 2000000; ++i) {
    const float s = std::ldexp(bits_to_float(0x3f800000u | mantissa(rng)), s_exp(rng));
    float x = std::ldexp(bits_to_float(0x3f800000u | mantissa(rng)), x_exp(rng) + std::ilogb(s));
    if (i & 1) x = -x;
    if (std::fabs(x) / s > 0x1p99f) continue;
    expect_division_matches(x, s);
  }
  // Zeros keep their sign; NaN stays NaN; tiny and subnormal dividends.
  for (float s : divisors) {
    EXPECT_EQ(float_to_bits(ops::divide_with_reciprocal(-0.0f, s, 1.0f / s)), 0x80000000u);
    EXPECT_EQ(float_to_bits(ops::divide_with_reciprocal(0.0f, s, 1.0f / s)), 0u);
    EXPECT_TRUE(std::isnan(ops::divide_with_reciprocal(NAN, s, 1.0f / s)));
    for (float x : {0x1p-149f, -0x1p-149f, 0x1.8p-130f, -0x1p-126f, 0x1p-100f}) expect_division_matches(x, s);
  }
  // Infinite dividends and out-of-range divisors are not regular: the kernels divide instead.
  EXPECT_FALSE(ops::divisor_is_regular(1.0f, 1.0f, INFINITY));
  EXPECT_FALSE(ops::divisor_is_regular(0x1p-61f, 0x1p61f, 1.0f));
  EXPECT_FALSE(ops::divisor_is_regular(0x1p61f, 0x1p-61f, 1.0f));
  EXPECT_FALSE(ops::divisor_is_regular(0x1p-50f, 0x1p50f, 0x1p60f));
}

TEST(QuantEncode, PackedQuantizeIsFourQuantizes) {
  const float v[4] = {1.0f, -0.0f, NAN, 300.0f};
  EXPECT_EQ(ops::quantize_fp8x4<E4M3FNFormat>(v[0], v[1], v[2], v[3], 448.0f),
            uint32_t(0x38) | (0x80u << 8) | (0x7Eu << 16) | (fast_cvt(300.0f, DType::kE4M3FN) << 24));
  EXPECT_EQ(ops::quantize_fp8x4<E4M3FNUZFormat>(v[0], v[1], v[2], v[3], 224.0f),
            uint32_t(0x40) | (0x7Eu << 16) | (0x7Eu << 24));
}

TEST(QuantEncode, HandGoldens) {
  // e4m3fn: code = sign | (exp + 7) << 3 | mantissa. 1.0 = 0x38, 1.5 = 0x3C, 448 = 1.75 * 2^8 = 0x7E.
  EXPECT_EQ(fast_cvt(1.0f, DType::kE4M3FN), 0x38);
  EXPECT_EQ(fast_cvt(-1.5f, DType::kE4M3FN), 0xBC);
  EXPECT_EQ(fast_cvt(448.0f, DType::kE4M3FN), 0x7E);
  EXPECT_EQ(fast_cvt(1e30f, DType::kE4M3FN), 0x7E);  // clamped
  EXPECT_EQ(fast_cvt(-INFINITY, DType::kE4M3FN), 0xFE);
  EXPECT_EQ(fast_cvt(NAN, DType::kE4M3FN), 0x7E);        // NaN -> +MAX
  EXPECT_EQ(fast_cvt(-0.0f, DType::kE4M3FN), 0x80);      // e4m3fn keeps -0
  EXPECT_EQ(fast_cvt(0x1p-9f, DType::kE4M3FN), 0x01);    // smallest subnormal
  EXPECT_EQ(fast_cvt(0x1p-10f, DType::kE4M3FN), 0x00);   // tie to even: 0
  EXPECT_EQ(fast_cvt(0x1.8p-9f, DType::kE4M3FN), 0x02);  // 1.5 units: tie to 2
  EXPECT_EQ(fast_cvt(0x1.fp-7f, DType::kE4M3FN), 0x08);  // 7.75 units round up into 2^-6
  // e4m3fnuz: bias 8, so 1.0 = 0x40 and MAX 224 = 1.75 * 2^7 = 0x7E; no negative zero.
  EXPECT_EQ(fast_cvt(1.0f, DType::kE4M3FNUZ), 0x40);
  EXPECT_EQ(fast_cvt(300.0f, DType::kE4M3FNUZ), 0x7E);
  EXPECT_EQ(fast_cvt(-0.0f, DType::kE4M3FNUZ), 0x00);
  EXPECT_EQ(fast_cvt(-0x1p-12f, DType::kE4M3FNUZ), 0x00);  // rounds to -0: stored +0
}

}  // namespace
}  // namespace fp8kit
