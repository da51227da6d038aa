// Integer arithmetic on sizes that come from files and command lines (shapes, block sizes, layer
// counts): every sum, product and quotient either is exact or throws Error(kInvalidArgument)
// naming what overflowed, never wraps. ceil_div never overflows. Not a public header.
// Tested in tests/cpu/test_checked_math.cpp.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/check.h"

namespace fp8kit {

// ceil(a / b) for a >= 0 and b > 0, without the overflow of (a + b - 1) / b near INT64_MAX.
// Callers check b > 0 (a block size, a tile) where it comes from input.
constexpr int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

// ceil(a / b), checked: Error naming `what` unless a >= 0 and b > 0.
inline int64_t checked_ceil_div(int64_t a, int64_t b, std::string_view what) {
  FP8KIT_CHECK_ARG(a >= 0 && b > 0, "{}: cannot divide {} into blocks of {}", what, a, b);
  return ceil_div(a, b);
}

inline int64_t checked_add(int64_t a, int64_t b, std::string_view what) {
  int64_t r = 0;
  FP8KIT_CHECK_ARG(!__builtin_add_overflow(a, b, &r), "{}: {} + {} overflows a 64-bit integer", what, a, b);
  return r;
}

inline int64_t checked_mul(int64_t a, int64_t b, std::string_view what) {
  int64_t r = 0;
  FP8KIT_CHECK_ARG(!__builtin_mul_overflow(a, b, &r), "{}: {} x {} overflows a 64-bit integer", what, a, b);
  return r;
}

// The element count of a shape of non-negative dimensions; a zero dimension makes it 0 whatever
// the others are (the product of the others must still fit, so strides cannot overflow).
inline int64_t checked_numel(const std::vector<int64_t>& shape, std::string_view what) {
  int64_t nonzero = 1;
  bool empty = false;
  for (const int64_t d : shape) {
    FP8KIT_CHECK_ARG(d >= 0, "{}: negative dimension {}", what, d);
    if (d == 0) {
      empty = true;
    } else {
      nonzero = checked_mul(nonzero, d, what);
    }
  }
  return empty ? 0 : nonzero;
}

// numel x element_size bytes, checked.
inline int64_t checked_bytes(int64_t numel, int64_t element_size, std::string_view what) {
  return checked_mul(numel, element_size, what);
}

}  // namespace fp8kit
