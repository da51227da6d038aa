// The branch-free element steps of src/ops/quant/quant_encode.h against the scalar definitions
// they replace: every f16/bf16 input, every fp8 rounding boundary, and a dense sample of floats.
// (An exhaustive run over all 2^32 floats for MAX = 448 and 224 found only signalling NaNs
// differing, where glibc's fminf returns NaN but CUDA's, which the spec follows, returns MAX; the
// ops never see a signalling NaN, since v = x * inv or x / s quiets it.)
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
