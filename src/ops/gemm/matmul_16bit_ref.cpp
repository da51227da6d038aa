// CPU reference of matmul_16bit (include/fp8kit/ops/gemm.h): operands widened exactly to double,
// products (exact in double) summed in double with the bias, then one rounding to the output
// dtype. Tested by tests/cpu/test_matmul16.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/parallel.h"
#include "fp8kit/half.h"
#include "ops/gemm/matmul_16bit_args.h"

namespace fp8kit::ops {
namespace {

double load(const void* p, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::kBF16: return bf16_to_float(static_cast<const BFloat16*>(p)[i]);
    case DType::kF16: return f16_to_float(static_cast<const Float16*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

// double -> float rounded to odd (truncate, then set the last bit when inexact). A second
// rounding of that float to a format with at least two fewer significand bits (bf16, f16) is
// the correctly rounded result of the double: one rounding, as the formula says.
float round_to_odd(double v) {
  float f = float(v);
  if (double(f) == v || std::isnan(v)) return f;
  if (std::fabs(double(f)) > std::fabs(v)) f = std::nextafter(f, 0.0f);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  bits |= 1u;
  std::memcpy(&f, &bits, 4);
  return f;
}

void store(void* p, DType dtype, int64_t i, double v) {
  switch (dtype) {
    case DType::kBF16: static_cast<BFloat16*>(p)[i] = float_to_bf16(round_to_odd(v)); break;
    case DType::kF16: static_cast<Float16*>(p)[i] = float_to_f16(round_to_odd(v)); break;
    default: static_cast<float*>(p)[i] = float(v); break;
  }
}

// Rows of a strided operand as contiguous doubles.
std::vector<double> widen(const void* p, DType dtype, int64_t rows, int64_t k, int64_t ld) {
  std::vector<double> out(size_t(rows * k));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < k; ++c) out[size_t(r * k + c)] = load(p, dtype, r * ld + c);
  }
  return out;
}

}  // namespace

void matmul_16bit_ref(const Matmul16Args& a) {
  // x widened once; the weight a block of rows at a time on each thread, so the scratch stays
  // small (widening a whole lm_head to double would take 8 bytes per weight: 226 MB for a 135M
  // model's 49152 x 576 embedding) and the sums are the same.
  constexpr int64_t kRowsPerBlock = 32;
  const std::vector<double> x = widen(a.x, a.dtype, a.m, a.k, a.ldx);
  const int64_t blocks = (a.n + kRowsPerBlock - 1) / kRowsPerBlock;
  parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t j0 = b * kRowsPerBlock, rows = std::min(kRowsPerBlock, a.n - j0);
      const std::vector<double> w = widen(static_cast<const char*>(a.w) + j0 * a.ldw * int64_t(dtype_size(a.dtype)),
                                          a.dtype, rows, a.k, a.ldw);
      for (int64_t i = 0; i < a.m; ++i) {
        const double* xr = &x[size_t(i * a.k)];
        for (int64_t r = 0; r < rows; ++r) {
          const double* wr = &w[size_t(r * a.k)];
          double s = a.bias != nullptr ? load(a.bias, a.dtype, j0 + r) : 0.0;
          for (int64_t c = 0; c < a.k; ++c) s += xr[c] * wr[c];
          store(a.out, a.dtype, i * a.ldc + j0 + r, s);
        }
      }
    }
  });
}

}  // namespace fp8kit::ops
