// CPU reference of matmul_16bit (include/fp8kit/ops/gemm.h): operands widened exactly to double,
// products (exact in double) summed in double with the bias, then one rounding to the output
// dtype. Tested by tests/cpu/test_matmul16.cpp.
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
  const std::vector<double> x = widen(a.x, a.dtype, a.m, a.k, a.ldx);
  const std::vector<double> w = widen(a.w, a.dtype, a.n, a.k, a.ldw);
  parallel_for(a.m, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const double* xr = &x[size_t(i * a.k)];
      for (int64_t j = 0; j < a.n; ++j) {
        const double* wr = &w[size_t(j * a.k)];
        double s = a.bias != nullptr ? load(a.bias, a.dtype, j) : 0.0;
        for (int64_t c = 0; c < a.k; ++c) s += xr[c] * wr[c];
        store(a.out, a.dtype, i * a.ldc + j, s);
      }
    }
  });
}

}  // namespace fp8kit::ops
