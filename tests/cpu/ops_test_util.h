// Helpers of the transformer-op tests (test_kv_cache.cpp, test_paged_attention*.cpp,
// test_rms_norm.cpp, test_rope*.cpp, test_embedding.cpp, test_sampling.cpp): tensors from float
// lists in f32/f16/bf16, element read-back, rounding to a dtype, a seeded normal generator, and a
// CUDA-device tensor over host memory to check the routing without a GPU.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "fp8kit/half.h"
#include "fp8kit/tensor.h"

namespace fp8kit::ops_test {

inline constexpr DType kFloatDTypes[] = {DType::kF32, DType::kF16, DType::kBF16};

// v rounded to dtype (f32, f16, bf16) and widened back: the value a tensor of that dtype holds.
inline float round_to(float v, DType dtype) {
  switch (dtype) {
    case DType::kF16: return f16_to_float(float_to_f16(v));
    case DType::kBF16: return bf16_to_float(float_to_bf16(v));
    default: return v;
  }
}

inline void set_element(const Tensor& t, int64_t flat, float v) {
  switch (t.dtype()) {
    case DType::kF32: t.data<float>()[flat] = v; break;
    case DType::kF16: t.data<Float16>()[flat] = float_to_f16(v); break;
    case DType::kBF16: t.data<BFloat16>()[flat] = float_to_bf16(v); break;
    default: ADD_FAILURE() << "set_element: unsupported dtype";
  }
}

inline float get_element(const Tensor& t, int64_t flat) {
  switch (t.dtype()) {
    case DType::kF32: return t.data<float>()[flat];
    case DType::kF16: return f16_to_float(t.data<Float16>()[flat]);
    case DType::kBF16: return bf16_to_float(t.data<BFloat16>()[flat]);
    default: ADD_FAILURE() << "get_element: unsupported dtype"; return 0.0f;
  }
}

// A contiguous tensor of `dtype` holding `values` rounded to it.
inline Tensor make_tensor(const std::vector<float>& values, const Shape& shape, DType dtype = DType::kF32) {
  Tensor t = Tensor::empty(shape, dtype);
  EXPECT_EQ(int64_t(values.size()), t.numel());
  for (size_t i = 0; i < values.size(); ++i) set_element(t, int64_t(i), values[i]);
  return t;
}

// Every element of an f32/f16/bf16 tensor (any strides), row-major, widened to float.
inline std::vector<float> to_floats(const Tensor& t) {
  const Tensor c = t.contiguous();
  std::vector<float> v(size_t(c.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = get_element(c, int64_t(i));
  return v;
}

// n samples of N(0, sigma^2) from a fixed seed.
inline std::vector<float> normal_values(size_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

// The unit in the last place of |v| in dtype (f32: 2^-23 relative, f16: 2^-10 with its
// subnormal floor, bf16: 2^-7).
inline double ulp_of(double v, DType dtype) {
  const int mantissa = dtype == DType::kF32 ? 23 : dtype == DType::kF16 ? 10 : 7;
  const int min_exp = dtype == DType::kF16 ? -14 : -126;
  int e = 0;
  std::frexp(std::fabs(v), &e);  // |v| = f * 2^e, f in [0.5, 1)
  return std::ldexp(1.0, std::max(e - 1, min_exp) - mantissa);
}

// A tensor that claims to live on cuda:0 but points at host memory: enough for the argument
// checks and the routing, which never dereference it.
inline Tensor fake_cuda_tensor(const Shape& shape, DType dtype) {
  auto host =
      std::make_shared<std::vector<uint8_t>>(size_t(std::max<int64_t>(shape_numel(shape), 1)) * dtype_size(dtype));
  return Tensor::from_blob(host->data(), shape, dtype, Device::cuda(0), host);
}

}  // namespace fp8kit::ops_test
