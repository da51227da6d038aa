// Helpers of the layer tests: checkpoint tensors whose values name their place (so a loaded
// parameter shows which checkpoint rows landed where), byte-wise comparison of row ranges,
// random 16-bit tensors, a scoped environment variable and a log capture.
#pragma once

#include <gtest/gtest.h>

#include <cfloat>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fp8kit/fp8.h"
#include "fp8kit/half.h"
#include "fp8kit/layers/linear.h"
#include "fp8kit/log.h"
#include "fp8kit/tensor.h"

namespace fp8kit::linear_test {

// The shards of a fused qkv layer.
inline const ShardId kQ{std::string("q")}, kK{std::string("k")}, kV{std::string("v")};
// What a weight scale holds until a checkpoint loads it: torch.finfo(float32).min.
inline constexpr float kNot = -FLT_MAX;

// [rows, cols] f32 with value tag * 1e6 + row * 1000 + col (exact in f32 for rows, cols < 1000).
inline Tensor tagged(int64_t rows, int64_t cols, int tag) {
  Tensor t = Tensor::empty({rows, cols}, DType::kF32);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) t.data<float>()[r * cols + c] = float(tag * 1000000 + r * 1000 + c);
  }
  return t;
}

// [rows, cols] e4m3fn with distinct finite codes per (tag, row, col) pattern (no NaN).
inline Tensor tagged_e4m3(int64_t rows, int64_t cols, int tag) {
  Tensor t = Tensor::empty({rows, cols}, DType::kE4M3FN);
  auto* p = static_cast<uint8_t*>(t.data_ptr());
  for (int64_t i = 0; i < rows * cols; ++i) p[i] = uint8_t((i * 7 + tag * 29) % 120);
  return t;
}

// The f32 value at (r, c) of a 2-D CPU tensor of any strides.
inline float at(const Tensor& t, int64_t r, int64_t c) {
  return *static_cast<const float*>(t.narrow(0, r, 1).narrow(1, c, 1).contiguous().data_ptr());
}

// Whether rows [a0, a0 + n) of `a` hold the same bytes as rows [b0, b0 + n) of `b`.
inline bool same_rows(const Tensor& a, int64_t a0, const Tensor& b, int64_t b0, int64_t n) {
  const Tensor x = a.narrow(0, a0, n).contiguous(), y = b.narrow(0, b0, n).contiguous();
  return x.shape() == y.shape() && x.dtype() == y.dtype() && std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

inline bool same_bits(const Tensor& a, const Tensor& b) {
  const Tensor x = a.contiguous(), y = b.contiguous();
  return x.shape() == y.shape() && x.dtype() == y.dtype() && std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

inline std::vector<float> values(const Tensor& t) {
  const Tensor c = t.contiguous();
  const float* p = c.data<float>();
  return std::vector<float>(p, p + c.numel());
}

inline Tensor random_16bit(const Shape& shape, DType dtype, std::mt19937& rng, float stddev = 1.0f) {
  std::normal_distribution<float> nd(0.0f, stddev);
  Tensor t = Tensor::empty(shape, dtype);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dtype == DType::kBF16) {
      t.data<BFloat16>()[i] = float_to_bf16(nd(rng));
    } else if (dtype == DType::kF16) {
      t.data<Float16>()[i] = float_to_f16(nd(rng));
    } else {
      t.data<float>()[i] = nd(rng);
    }
  }
  return t;
}

inline float read16(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kBF16: return bf16_to_float(t.data<BFloat16>()[i]);
    case DType::kF16: return f16_to_float(t.data<Float16>()[i]);
    default: return t.data<float>()[i];
  }
}

inline Tensor f32_vector(const std::vector<float>& v) { return Tensor::from_vector(v); }


// Collects warnings while alive.
class LogCapture {
 public:
  LogCapture() {
    previous_ = set_log_sink([this](LogLevel level, const std::string& message) {
      if (level == LogLevel::kWarning) warnings.push_back(message);
    });
  }
  ~LogCapture() { set_log_sink(previous_); }
  std::vector<std::string> warnings;

 private:
  LogSink previous_;
};

}  // namespace fp8kit::linear_test

namespace fp8kit {

// `options` with force_weight_only set to `forced` (the weight-only path on any device).
inline LinearOptions with_forced_weight_only(LinearOptions options, bool forced) {
  options.force_weight_only = forced;
  return options;
}

}  // namespace fp8kit
