// The arithmetic of the RMS norms that the CPU reference (rms_norm_ref.cpp) and the CUDA kernel
// (rms_norm_cuda.cu) share, so that both compute the same r from the same row: the sum of
// squares accumulated as a double-double (Neumaier's compensated sum; every square of an f32
// value is exact in double), which lands on the correctly rounded double sum whatever the order
// of the additions, then r = f32(1 / sqrt(sum / n + eps)) in IEEE double. Formula:
// include/fp8kit/ops/norm.h; tests: tests/cpu/test_rms_norm.cpp, tests/gpu/test_norm_rope_cuda.cpp.
#pragma once

#include <cmath>
#include <cstdint>

#include "fp8kit/host_device.h"

namespace fp8kit::ops::norm_math {

struct SquareSum {
  double hi = 0.0, lo = 0.0;  // the sum is hi + lo; lo collects the rounding errors of hi
};

// s += x (TwoSum: the error of hi + x is exact, and it goes to lo).
FP8KIT_HOST_DEVICE void add(SquareSum& s, double x) {
  const double t = s.hi + x;
  const double b = t - s.hi;
  s.lo += (s.hi - (t - b)) + (x - b);
  s.hi = t;
}
FP8KIT_HOST_DEVICE void add_square(SquareSum& s, float v) { add(s, double(v) * double(v)); }
FP8KIT_HOST_DEVICE SquareSum merge(SquareSum a, const SquareSum& b) {
  add(a, b.hi);
  a.lo += b.lo;
  return a;
}

// r = f32(1 / sqrt(sum / n + eps)).
FP8KIT_HOST_DEVICE float inverse_rms(const SquareSum& s, int64_t n, float eps) {
  const double sum = s.hi + s.lo;
  return float(1.0 / sqrt(sum / double(n) + double(eps)));
}

}  // namespace fp8kit::ops::norm_math
