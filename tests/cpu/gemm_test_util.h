// Helpers of the GEMM tests (CPU and GPU): random e4m3 operands, scales, an fp64 reference of
// scaled_mm written independently of the library's reference, and a tolerance check that a NaN
// can never pass.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fp8kit/fp8.h"
#include "fp8kit/half.h"
#include "fp8kit/tensor.h"

namespace fp8kit::gemm_test {

// [rows, cols] e4m3fn with values drawn from `values` (decoded floats that e4m3 holds exactly).
inline Tensor e4m3_from(const std::vector<float>& values, int64_t rows, int64_t cols) {
  Tensor t = Tensor::empty({rows, cols}, DType::kE4M3FN);
  auto* p = static_cast<uint8_t*>(t.data_ptr());
  for (int64_t i = 0; i < rows * cols; ++i) p[i] = float_to_e4m3fn_bits(values[size_t(i)]);
  return t;
}

// Random finite e4m3 codes (no NaN), magnitudes spread over the whole range.
inline Tensor random_e4m3(int64_t rows, int64_t cols, std::mt19937& rng) {
  Tensor t = Tensor::empty({rows, cols}, DType::kE4M3FN);
  auto* p = static_cast<uint8_t*>(t.data_ptr());
  std::uniform_int_distribution<int> code(0, 255);
  for (int64_t i = 0; i < rows * cols; ++i) {
    int c;
    do {
      c = code(rng);
    } while ((c & 0x7f) == 0x7f || (c & 0x7f) > 0x5f);  // no NaN; |v| <= 16 keeps sums tame
    p[i] = uint8_t(c);
  }
  return t;
}

inline Tensor random_scales(const Shape& shape, std::mt19937& rng, float lo = 0.01f, float hi = 0.1f) {
  Tensor t = Tensor::empty(shape, DType::kF32);
  std::uniform_real_distribution<float> d(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng);
  return t;
}

inline float read_out(const Tensor& y, int64_t i) {
  switch (y.dtype()) {
    case DType::kBF16: return bf16_to_float(y.data<BFloat16>()[i]);
    case DType::kF16: return f16_to_float(y.data<Float16>()[i]);
    default: return y.data<float>()[i];
  }
}

// y64[m, n] = sum over K-blocks (sum a*b) * sa * sb + bias, in double. `sa(i, kb)` and `sb(j, kb)`
// give the scales of row i / column j for K-block kb (kb = 0 with block_k = K when not blocked).
template <typename SA, typename SB>
std::vector<double> reference_fp64(const Tensor& a, const Tensor& b_nk, int64_t block_k, SA sa, SB sb,
                                   const std::vector<double>& bias) {
  const int64_t m = a.size(0), k = a.size(1), n = b_nk.size(0);
  const auto* pa = static_cast<const uint8_t*>(a.contiguous().data_ptr());
  const Tensor bc = b_nk.contiguous();
  const auto* pb = static_cast<const uint8_t*>(bc.data_ptr());
  std::vector<double> y(size_t(m * n));
  auto rows = [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double total = bias.empty() ? 0.0 : bias[size_t(j)];
        for (int64_t kb = 0; kb * block_k < k; ++kb) {
          double s = 0;
          for (int64_t kk = kb * block_k; kk < std::min(k, (kb + 1) * block_k); ++kk) {
            s += double(e4m3fn_bits_to_float(pa[i * k + kk])) * double(e4m3fn_bits_to_float(pb[j * k + kk]));
          }
          total += s * double(sa(i, kb)) * double(sb(j, kb));
        }
        y[size_t(i * n + j)] = total;
      }
    }
  };
  // Rows split over the machine's threads: the GPU tests check shapes of a few billion products.
  const int64_t threads = std::max<int64_t>(1, std::min<int64_t>(m, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (int64_t t = 0; t < threads; ++t) pool.emplace_back(rows, m * t / threads, m * (t + 1) / threads);
  for (std::thread& th : pool) th.join();
  return y;
}

// max |y - ref| / (|ref| + floor) over all elements; NaN in y makes it NaN (so `<= tol` fails).
inline double max_rel_error(const Tensor& y, const std::vector<double>& ref, double floor) {
  double worst = 0;
  for (int64_t i = 0; i < y.numel(); ++i) {
    const double e = std::abs(double(read_out(y, i)) - ref[size_t(i)]) / (std::abs(ref[size_t(i)]) + floor);
    if (std::isnan(e)) return e;
    worst = std::max(worst, e);
  }
  return worst;
}

}  // namespace fp8kit::gemm_test
