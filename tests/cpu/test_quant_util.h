// Helpers of the quantization tests (test_quant_*.cpp): tensors from float lists, byte and float
// read-back, and the spec's element rule written the plain scalar way (fminf/fmaxf, then the
// encoder of fp8.h), against which the library's branch-free loops are checked.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fp8kit/fp8.h"
#include "fp8kit/tensor.h"
#include "test_context.h"

namespace fp8kit::quant_test {

// 2^ceil(log2 s) for a positive normal s, from frexp (exact): s = f * 2^e with f in [0.5, 1).
inline float pow2_ceil(float s) {
  int e = 0;
  const float f = std::frexp(s, &e);
  return f == 0.5f ? s : std::ldexp(1.0f, e);
}

// A contiguous [shape] tensor of `dtype` (f32, f16 or bf16) holding `values` rounded to it.
inline Tensor make_tensor(const std::vector<float>& values, const Shape& shape, DType dtype = DType::kF32) {
  Tensor t = Tensor::empty(shape, dtype);
  for (size_t i = 0; i < values.size(); ++i) {
    switch (dtype) {
      case DType::kF32:
        t.data<float>()[i] = values[i];
        break;
      case DType::kF16:
        t.data<Float16>()[i] = float_to_f16(values[i]);
        break;
      case DType::kBF16:
        t.data<BFloat16>()[i] = float_to_bf16(values[i]);
        break;
      default:
        ADD_FAILURE() << "make_tensor: unsupported dtype";
    }
  }
  return t;
}

// The values of an f32/f16/bf16 tensor, row-major, widened to float.
inline std::vector<float> to_floats(const Tensor& t) {
  const Tensor c = t.contiguous();
  std::vector<float> v(size_t(c.numel()));
  for (size_t i = 0; i < v.size(); ++i) {
    switch (c.dtype()) {
      case DType::kF32:
        v[i] = c.data<float>()[i];
        break;
      case DType::kF16:
        v[i] = f16_to_float(c.data<Float16>()[i]);
        break;
      case DType::kBF16:
        v[i] = bf16_to_float(c.data<BFloat16>()[i]);
        break;
      default:
        ADD_FAILURE() << "to_floats: unsupported dtype";
    }
  }
  return v;
}

// The bytes of a tensor of 1-byte elements, row-major.
inline std::vector<uint8_t> to_bytes(const Tensor& t) {
  const Tensor c = t.contiguous();
  std::vector<uint8_t> v(size_t(c.numel()));
  if (!v.empty()) std::memcpy(v.data(), c.data_ptr(), v.size());
  return v;
}

inline float quant_max(DType fp8) { return fp8 == DType::kE4M3FNUZ ? 224.0f : 448.0f; }

inline float decode(DType fp8, uint8_t code) {
  return fp8 == DType::kE4M3FNUZ ? e4m3fnuz_bits_to_float(code) : e4m3fn_bits_to_float(code);
}

// cvt(clamp(v)) as the spec writes it: NaN -> +MAX (CUDA's fminf returns the non-NaN operand),
// then round to nearest even with the encoder of fp8.h.
inline uint8_t spec_cvt(float v, DType fp8) {
  const float max = quant_max(fp8);
  const float clamped = std::isnan(v) ? max : std::fmaxf(-max, std::fminf(v, max));
  return fp8 == DType::kE4M3FNUZ ? encode_fp8<E4M3FNUZFormat>(clamped, Saturation::kSatFinite)
                                 : encode_fp8<E4M3FNFormat>(clamped, Saturation::kSatFinite);
}

// max_i |x_i| ignoring NaN, the way the reference kernels reduce (CUDA fmaxf from 0; glibc's
// fmaxf would let a signalling NaN through, hence the explicit test).
inline float spec_absmax(const float* x, int64_t n) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isnan(x[i])) m = std::fmaxf(m, std::fabs(x[i]));
  }
  return m;
}

// Random values of a few magnitudes, with the dtype's rounding already applied (so a test's
// float copy equals what the op reads).
inline std::vector<float> random_values(size_t n, uint32_t seed, DType dtype = DType::kF32, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, sigma);
  std::uniform_int_distribution<int> pick(0, 15);
  std::vector<float> v(n);
  for (auto& x : v) {
    x = normal(rng);
    if (pick(rng) == 0) x *= 40.0f;  // outliers set the absmax
    if (pick(rng) == 1) x *= 1e-3f;  // small values land on subnormal codes
  }
  return to_floats(make_tensor(v, {int64_t(n)}, dtype));
}

// Runs `fn` and checks that it throws an fp8kit::Error of `code` whose message is `message`.
template <typename Fn>
void expect_error(Fn&& fn, ErrorCode code, const std::string& message) {
  try {
    fn();
    ADD_FAILURE() << "expected an error: " << message;
  } catch (const Error& e) {
    EXPECT_EQ(int(e.code()), int(code)) << e.what();
    EXPECT_EQ(std::string(e.what()), message);
  }
}

}  // namespace fp8kit::quant_test
