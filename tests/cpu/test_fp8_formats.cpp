// Every FP8 code of every format decodes to the value its definition gives (computed here in
// double from sign, exponent and mantissa fields), and encode/decode agree with each other.
// The oracle comparison against the CUDA toolkit lives in test_fp8_cuda_oracle.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "fp8kit/fp8.h"

namespace fp8kit {
namespace {

// Value of an 8-bit minifloat code by its definition; NaN where the format has NaN.
double reference_value(uint8_t c, int exp_bits, int man_bits, int bias, bool fnuz, bool ieee_specials) {
  const int sign = c >> 7;
  const int e = (c >> man_bits) & ((1 << exp_bits) - 1);
  const int m = c & ((1 << man_bits) - 1);
  if (fnuz && c == 0x80) return std::numeric_limits<double>::quiet_NaN();
  if (ieee_specials && e == (1 << exp_bits) - 1) {
    return m == 0 ? (sign ? -INFINITY : INFINITY) : std::numeric_limits<double>::quiet_NaN();
  }
  if (!fnuz && !ieee_specials && (c & 0x7f) == 0x7f) return std::numeric_limits<double>::quiet_NaN();
  const double frac = e == 0 ? m / double(1 << man_bits) : 1.0 + m / double(1 << man_bits);
  const int exponent = e == 0 ? 1 - bias : e - bias;
  const double v = std::ldexp(frac, exponent);
  return sign ? -v : v;
}

template <typename F>
void check_all_codes(int exp_bits, int man_bits, bool ieee_specials) {
  int nan_codes = 0;
  for (int c = 0; c < 256; ++c) {
    const double want = reference_value(uint8_t(c), exp_bits, man_bits, F::kBias, F::kFnuz, ieee_specials);
    const float got = decode_fp8<F>(uint8_t(c));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << "code " << c;
      ++nan_codes;
      continue;
    }
    EXPECT_EQ(double(got), want) << "code " << c;
    EXPECT_EQ(std::signbit(got), bool(c & 0x80)) << "code " << c;
    // Re-encoding a decoded value gives the code back; saturation sends infinities to +-max.
    const int saturated = std::isinf(got) ? int((c & 0x80) | F::kMaxCode) : c;
    EXPECT_EQ(encode_fp8<F>(got, Saturation::kSatFinite), saturated) << "code " << c;
    EXPECT_EQ(encode_fp8<F>(got, Saturation::kNoSat), c) << "code " << c;
  }
  if (F::kFnuz) {
    EXPECT_EQ(nan_codes, 1);
  }
}

TEST(Fp8Formats, E4M3FNAllCodes) {
  check_all_codes<E4M3FNFormat>(4, 3, false);
  EXPECT_EQ(e4m3fn_bits_to_float(0x7e), 448.0f);
  EXPECT_EQ(e4m3fn_bits_to_float(0x08), 0.015625f);        // min normal 2^-6
  EXPECT_EQ(e4m3fn_bits_to_float(0x01), 0.001953125f);     // min subnormal 2^-9
  EXPECT_TRUE(std::signbit(e4m3fn_bits_to_float(0x80)));   // -0
}

TEST(Fp8Formats, E4M3FNUZAllCodes) {
  check_all_codes<E4M3FNUZFormat>(4, 3, false);
  EXPECT_EQ(e4m3fnuz_bits_to_float(0x7f), 240.0f);
  EXPECT_EQ(e4m3fnuz_bits_to_float(0x7e), 224.0f);
  EXPECT_TRUE(std::isnan(e4m3fnuz_bits_to_float(0x80)));
}

TEST(Fp8Formats, E5M2AllCodes) {
  check_all_codes<E5M2Format>(5, 2, true);
  EXPECT_EQ(e5m2_bits_to_float(0x7b), 57344.0f);
  EXPECT_EQ(e5m2_bits_to_float(0x7c), INFINITY);
}

TEST(Fp8Formats, E5M2FNUZAllCodes) {
  check_all_codes<E5M2FNUZFormat>(5, 2, false);
  EXPECT_EQ(decode_fp8<E5M2FNUZFormat>(0x7f), 57344.0f);
}

TEST(Fp8Formats, FnuzIsHalfOfFnForTheSameBits) {
  // e4m3fnuz has bias 8, e4m3fn bias 7: the same finite bits mean half the value.
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f || c == 0x80) continue;
    EXPECT_EQ(e4m3fnuz_bits_to_float(uint8_t(c)) * 2.0f, e4m3fn_bits_to_float(uint8_t(c))) << c;
  }
}

TEST(Fp8Formats, UE8M0AllCodes) {
  for (int c = 0; c < 255; ++c) {
    EXPECT_EQ(double(ue8m0_bits_to_float(uint8_t(c))), std::ldexp(1.0, c - 127)) << c;
    EXPECT_EQ(float_to_ue8m0_bits(ue8m0_bits_to_float(uint8_t(c)), E8M0Rounding::kTowardZero), c) << c;
    EXPECT_EQ(float_to_ue8m0_bits(ue8m0_bits_to_float(uint8_t(c)), E8M0Rounding::kUpward), c) << c;
  }
  EXPECT_TRUE(std::isnan(ue8m0_bits_to_float(0xff)));
  EXPECT_EQ(float_to_ue8m0_bits(3.0f, E8M0Rounding::kUpward), 128 + 1);  // ceil(log2 3) = 2
  EXPECT_EQ(float_to_ue8m0_bits(3.0f, E8M0Rounding::kTowardZero), 128);
  EXPECT_EQ(float_to_ue8m0_bits(-3.0f, E8M0Rounding::kUpward), 128 + 1);  // sign ignored
}

TEST(Fp8Formats, EdgeCasesOfEncoding) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(float_to_e4m3fn_bits(nan), 0x7f);
  EXPECT_EQ(float_to_e4m3fn_bits(-nan), 0x7f);
  EXPECT_EQ(float_to_e4m3fn_bits(INFINITY), 0x7e);
  EXPECT_EQ(float_to_e4m3fn_bits(-INFINITY), 0xfe);
  EXPECT_EQ(float_to_e4m3fn_bits(INFINITY, Saturation::kNoSat), 0x7f);
  EXPECT_EQ(float_to_e4m3fn_bits(464.0f, Saturation::kNoSat), 0x7e);    // tie between 448 and 480: even
  EXPECT_EQ(float_to_e4m3fn_bits(464.01f, Saturation::kNoSat), 0x7f);   // overflow: NaN
  EXPECT_EQ(float_to_e4m3fn_bits(-464.01f, Saturation::kNoSat), 0xff);
  EXPECT_EQ(float_to_e4m3fn_bits(-0.0f), 0x80);
  EXPECT_EQ(float_to_e4m3fn_bits(-1e-10f), 0x80);
  EXPECT_EQ(float_to_e4m3fnuz_bits(-0.0f), 0x00);
  EXPECT_EQ(float_to_e4m3fnuz_bits(-1e-10f), 0x00);
  EXPECT_EQ(float_to_e4m3fnuz_bits(nan), 0x80);
  EXPECT_EQ(float_to_e4m3fnuz_bits(1000.0f), 0x7f);
  EXPECT_EQ(float_to_e4m3fnuz_bits(-1000.0f), 0xff);
  EXPECT_EQ(float_to_e4m3fnuz_bits(1000.0f, Saturation::kNoSat), 0x80);
  EXPECT_EQ(float_to_e5m2_bits(1e9f, Saturation::kNoSat), 0x7c);
  EXPECT_EQ(float_to_e5m2_bits(-1e9f), 0xfb);
  // Ties to even in the subnormal range: 2^-10 is half of e4m3fn's smallest subnormal.
  EXPECT_EQ(float_to_e4m3fn_bits(0.0009765625f), 0x00);
  EXPECT_EQ(float_to_e4m3fn_bits(0.0029296875f), 0x02);  // 1.5 units -> 2
  EXPECT_EQ(float_to_e4m3fn_bits(0.0048828125f), 0x02);  // 2.5 units -> 2
}

}  // namespace
}  // namespace fp8kit
