// Inner loops of the CPU quantization reference (quant_ref.cpp, quant_weight_ref.cpp): absmax of
// a run of elements, quantization of a run with a reciprocal or a divisor, and type dispatch.
// Plain loops over restrict pointers that the compiler vectorizes; the element step is
// quant_encode.h, bit-identical to the spec's scalar formula in the default FP environment
// (round to nearest even; a flush-to-zero mode would also flush tiny x * inv the spec keeps).
#pragma once

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/check.h"
#include "fp8kit/dtype.h"
#include "ops/quant/quant_encode.h"

// GCC builds for x86-64 Linux also compile the loops below for AVX2 and pick one version per CPU
// at load time (ifunc). Both are the same IEEE fp32 arithmetic (no FMA is enabled, nothing is
// reassociated), so the results are identical; AVX2 only widens the lanes (about 2.5x here).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    !defined(FP8KIT_NO_CPU_CLONES)
#define FP8KIT_CPU_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define FP8KIT_CPU_CLONES
#endif

namespace fp8kit::ops::ref {

// max_i |x_i| as abs_bits, NaN ignored (fmaxf semantics, starting from 0). 16-bit inputs reduce
// in int16 lanes (every non-NaN magnitude is <= 0x7f80), which plain SSE2 has a max for.
template <typename T>
FP8KIT_CPU_CLONES uint32_t absmax_bits(const T* __restrict x, int64_t n) {
  using Lane = std::conditional_t<sizeof(T) == 2, int16_t, int32_t>;
  Lane m = 0;
  for (int64_t i = 0; i < n; ++i) {
    const Lane a = Lane(abs_bits(x[i]));
    m = a > m ? a : m;
  }
  return uint32_t(m);
}

template <typename T>
float absmax_to_float(uint32_t bits) {
  return abs_bits_to_float(bits, T{});
}

// out_i = cvt(clamp(x_i * inv)): spec 2.2 rule 1 (the reciprocal form).
template <typename T, typename F>
FP8KIT_CPU_CLONES void quantize_mul(const T* __restrict x, int64_t n, float inv, float fp8_max,
                                    uint8_t* __restrict out) {
  for (int64_t i = 0; i < n; ++i) out[i] = quantize_fp8<F>(load_float(x[i]) * inv, fp8_max);
}

// out_i = cvt(clamp(x_i / s)): spec 2.2 rules 3 and 4 (true division).
template <typename T, typename F>
FP8KIT_CPU_CLONES void quantize_div(const T* __restrict x, int64_t n, float s, float fp8_max, uint8_t* __restrict out) {
  for (int64_t i = 0; i < n; ++i) out[i] = quantize_fp8<F>(load_float(x[i]) / s, fp8_max);
}

// Elements [0, n) of a strided run as a contiguous pointer: the run itself when stride is 1,
// otherwise a copy in `buffer`.
template <typename T>
const T* contiguous_run(const T* x, int64_t n, int64_t stride, std::vector<T>& buffer) {
  if (stride == 1) return x;
  buffer.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) buffer[size_t(i)] = x[i * stride];
  return buffer.data();
}

// Calls fn(T{}, F{}) with T the C++ type of a float input dtype and F the e4m3 format of out.
template <typename Fn>
void dispatch_input_and_format(DType in, DType out, Fn&& fn) {
  auto with_format = [&](auto t) {
    switch (out) {
      case DType::kE4M3FN:
        return fn(t, E4M3FNFormat{});
      case DType::kE4M3FNUZ:
        return fn(t, E4M3FNUZFormat{});
      default:
        fail(ErrorCode::kInternal, "quant_ref: unexpected output dtype {}", dtype_name(out));
    }
  };
  switch (in) {
    case DType::kF32:
      return with_format(float{});
    case DType::kF16:
      return with_format(Float16{});
    case DType::kBF16:
      return with_format(BFloat16{});
    default:
      fail(ErrorCode::kInternal, "quant_ref: unexpected input dtype {}", dtype_name(in));
  }
}

// Rows of at least ~64 Ki elements per parallel_for chunk: enough work to pay for a hand-off.
inline int64_t row_grain(int64_t row_elements) {
  return std::max<int64_t>(1, (int64_t(1) << 16) / std::max<int64_t>(row_elements, 1));
}

}  // namespace fp8kit::ops::ref
