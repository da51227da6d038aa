// FP8, UE8M0, f16 and bf16 conversions against the CUDA toolkit's own host implementations
// (cuda_fp8.h, cuda_fp16.h, cuda_bf16.h): every bf16 and f16 input, and millions of f32 inputs
// chosen to hit ties, subnormals and overflow. Skipped when the toolkit headers are absent.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "fp8kit/fp8.h"

#if FP8KIT_HAVE_CUDA_FP8_H
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#endif

namespace fp8kit {
namespace {

#if FP8KIT_HAVE_CUDA_FP8_H

constexpr Saturation kSats[] = {Saturation::kSatFinite, Saturation::kNoSat};
__nv_saturation_t nv(Saturation s) { return s == Saturation::kSatFinite ? __NV_SATFINITE : __NV_NOSAT; }

// Float inputs that probe every rounding decision of both FP8 formats: each code's value,
// the midpoints between neighbours, and one ulp either side of those, with both signs.
std::vector<float> boundary_floats() {
  std::vector<float> out;
  for (int format = 0; format < 2; ++format) {
    std::vector<float> values;
    for (int c = 0; c < 128; ++c) {
      const float v = format == 0 ? e4m3fn_bits_to_float(uint8_t(c)) : e5m2_bits_to_float(uint8_t(c));
      if (std::isfinite(v)) values.push_back(v);
    }
    // One step past the largest finite value, as if the format went on.
    values.push_back(format == 0 ? 480.0f : 65536.0f);
    for (size_t i = 0; i < values.size(); ++i) {
      const float points[] = {values[i], i + 1 < values.size() ? 0.5f * (values[i] + values[i + 1]) : values[i]};
      for (float p : points) {
        for (float q : {p, std::nextafter(p, 0.0f), std::nextafter(p, INFINITY)}) {
          out.push_back(q);
          out.push_back(-q);
        }
      }
    }
  }
  for (float special : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e30f, -1e30f, 1e-30f, 3.4e38f}) out.push_back(special);
  return out;
}

void expect_fp8_matches(float x) {
  for (Saturation s : kSats) {
    ASSERT_EQ(float_to_e4m3fn_bits(x, s), __nv_cvt_float_to_fp8(x, nv(s), __NV_E4M3))
        << "e4m3 x=" << x << " bits=" << std::hex << float_to_bits(x) << " sat=" << int(s);
    ASSERT_EQ(float_to_e5m2_bits(x, s), __nv_cvt_float_to_fp8(x, nv(s), __NV_E5M2))
        << "e5m2 x=" << x << " bits=" << std::hex << float_to_bits(x) << " sat=" << int(s);
  }
}

void expect_ue8m0_matches(float x) {
  for (Saturation s : kSats) {
    ASSERT_EQ(float_to_ue8m0_bits(x, E8M0Rounding::kTowardZero, s), __nv_cvt_float_to_e8m0(x, nv(s), cudaRoundZero))
        << "x=" << x;
    ASSERT_EQ(float_to_ue8m0_bits(x, E8M0Rounding::kUpward, s), __nv_cvt_float_to_e8m0(x, nv(s), cudaRoundPosInf))
        << "x=" << x;
  }
}

TEST(Fp8CudaOracle, EveryBf16Value) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float x = bf16_to_float(BFloat16{uint16_t(b)});
    __nv_bfloat16_raw raw;
    raw.x = uint16_t(b);
    for (Saturation s : kSats) {
      ASSERT_EQ(float_to_e4m3fn_bits(x, s), __nv_cvt_bfloat16raw_to_fp8(raw, nv(s), __NV_E4M3)) << std::hex << b;
      ASSERT_EQ(float_to_e5m2_bits(x, s), __nv_cvt_bfloat16raw_to_fp8(raw, nv(s), __NV_E5M2)) << std::hex << b;
      ASSERT_EQ(float_to_ue8m0_bits(x, E8M0Rounding::kUpward, s),
                __nv_cvt_bfloat16raw_to_e8m0(raw, nv(s), cudaRoundPosInf))
          << std::hex << b;
    }
  }
}

TEST(Fp8CudaOracle, EveryF16Value) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float x = f16_to_float(Float16{uint16_t(h)});
    __half_raw raw;
    raw.x = uint16_t(h);
    for (Saturation s : kSats) {
      ASSERT_EQ(float_to_e4m3fn_bits(x, s), __nv_cvt_halfraw_to_fp8(raw, nv(s), __NV_E4M3)) << std::hex << h;
      ASSERT_EQ(float_to_e5m2_bits(x, s), __nv_cvt_halfraw_to_fp8(raw, nv(s), __NV_E5M2)) << std::hex << h;
    }
  }
}

TEST(Fp8CudaOracle, BoundaryFloats) {
  const std::vector<float> xs = boundary_floats();
  ASSERT_GT(xs.size(), 2000u);
  for (float x : xs) {
    expect_fp8_matches(x);
    expect_ue8m0_matches(x);
  }
}

TEST(Fp8CudaOracle, RandomFloats) {
  std::mt19937 rng(1234);
  // Random bit patterns cover every exponent (NaNs and infinities included); a second stream
  // concentrates on the FP8 range, where the rounding decisions are.
  std::uniform_real_distribution<float> in_range(-600.0f, 600.0f);
  for (int i = 0; i < 4'000'000; ++i) {
    expect_fp8_matches(bits_to_float(rng()));
    expect_ue8m0_matches(bits_to_float(rng()));
    expect_fp8_matches(in_range(rng));
    expect_fp8_matches(in_range(rng) * 1e-3f);
  }
}

TEST(Fp8CudaOracle, DecodeMatchesHalfConversion) {
  for (int c = 0; c < 256; ++c) {
    const __half_raw e4 = __nv_cvt_fp8_to_halfraw(uint8_t(c), __NV_E4M3);
    const __half_raw e5 = __nv_cvt_fp8_to_halfraw(uint8_t(c), __NV_E5M2);
    const float want4 = f16_to_float(Float16{e4.x}), want5 = f16_to_float(Float16{e5.x});
    if (std::isnan(want4)) {
      EXPECT_TRUE(std::isnan(e4m3fn_bits_to_float(uint8_t(c))));
    } else {
      EXPECT_EQ(e4m3fn_bits_to_float(uint8_t(c)), want4) << c;
    }
    if (std::isnan(want5)) {
      EXPECT_TRUE(std::isnan(e5m2_bits_to_float(uint8_t(c))));
    } else {
      EXPECT_EQ(e5m2_bits_to_float(uint8_t(c)), want5) << c;
    }
  }
}

TEST(HalfCudaOracle, F16AndBf16Conversions) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    __half_raw raw;
    raw.x = uint16_t(h);
    const float want = __half2float(__half(raw));
    const float got = f16_to_float(Float16{uint16_t(h)});
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got));
    } else {
      ASSERT_EQ(float_to_bits(got), float_to_bits(want)) << std::hex << h;
    }
  }
  std::mt19937 rng(99);
  for (int i = 0; i < 4'000'000; ++i) {
    float x = bits_to_float(rng());
    if (i % 2) x = std::ldexp(float(rng() % 100000) / 100000.0f, int(rng() % 60) - 40);
    const __half_raw h = __half_raw(__float2half_rn(x));
    const __nv_bfloat16_raw b = __nv_bfloat16_raw(__float2bfloat16_rn(x));
    if (std::isnan(x)) {
      ASSERT_TRUE(std::isnan(f16_to_float(float_to_f16(x))));
      ASSERT_TRUE(std::isnan(bf16_to_float(float_to_bf16(x))));
      continue;
    }
    ASSERT_EQ(float_to_f16(x).bits, h.x) << "x=" << x << " bits=" << std::hex << float_to_bits(x);
    ASSERT_EQ(float_to_bf16(x).bits, b.x) << "x=" << x << " bits=" << std::hex << float_to_bits(x);
  }
}

#else

TEST(Fp8CudaOracle, SkippedWithoutCudaHeaders) { GTEST_SKIP() << "cuda_fp8.h not found at configure time"; }

#endif

}  // namespace
}  // namespace fp8kit
