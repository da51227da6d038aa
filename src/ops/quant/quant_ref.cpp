// CPU reference of the activation quantization ops: scaled_fp8_quant (static, dynamic per-tensor,
// dynamic per-token; spec 1.6 and 2.2 rules 1-3) and per_token_group_quant (rule 4). Rows run in
// parallel; within a row, quant_ref_loops.h does the arithmetic. Tested by
// tests/cpu/test_quant_scaled.cpp and test_quant_group.cpp.
#include "ops/quant/quant_ref.h"

#include <cmath>
#include <mutex>

#include "core/parallel.h"
#include "ops/quant/quant_ref_loops.h"

namespace fp8kit::ops {
namespace {

using ref::absmax_bits;
using ref::absmax_to_float;
using ref::row_grain;

// max over rows of max_k |x[r, k]|, NaN ignored, as fmaxf starting from 0 (spec 2.2 rule 2: the
// order of a max reduction does not change its result).
template <typename T>
float absmax_of_rows(const T* x, int64_t rows, int64_t cols, int64_t row_stride) {
  if (rows == 0 || cols == 0) return absmax_to_float<T>(0);  // no element (x may be null)
  std::mutex mutex;
  uint32_t result = 0;
  parallel_for(rows, row_grain(cols), [&](int64_t begin, int64_t end) {
    uint32_t local = 0;
    for (int64_t r = begin; r < end; ++r) local = std::max(local, absmax_bits(x + r * row_stride, cols));
    std::lock_guard<std::mutex> lock(mutex);
    result = std::max(result, local);
  });
  return absmax_to_float<T>(result);
}

// Spec 2.2 rule 1 with per-tensor scale s.
template <typename T, typename F>
void quantize_rows_per_tensor(const ScaledFp8QuantArgs& a, float s) {
  const T* in = static_cast<const T*>(a.input);
  uint8_t* out = static_cast<uint8_t*>(a.out);
  if (a.m == 0 || a.k == 0) return;  // no element to write (the buffers may be null)
  if (s == 0.0f) {
    // Deviation from the reference (spec 2.9 H2; docs/compat.md): it computes 1/s = inf and
    // 0 * inf = NaN, so every element, zeros included, becomes FP8_MAX. fp8kit writes zero codes:
    // they dequantize to 0 like the reference's q * 0, and a consumer that looks at the codes alone
    // (a GEMM scaling after accumulation, a checkpoint reader) sees zeros, not a saturated tensor.
    // The scale itself stays 0, bit-exact with the reference.
    for (int64_t r = 0; r < a.m; ++r) std::memset(out + r * a.out_row_stride, 0, size_t(a.k));
    return;
  }
  const float inv = 1.0f / s;
  parallel_for(a.m, row_grain(a.k), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      ref::quantize_mul<T, F>(in + r * a.input_row_stride, a.k, inv, a.fp8_max, out + r * a.out_row_stride);
    }
  });
}

// Spec 2.2 rule 3: one scale per row, floored, optionally bounded above through scale_ub.
template <typename T, typename F>
void quantize_rows_per_token(const ScaledFp8QuantArgs& a) {
  const T* in = static_cast<const T*>(a.input);
  uint8_t* out = static_cast<uint8_t*>(a.out);
  parallel_for(a.m, row_grain(a.k), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T* x = a.k > 0 ? in + r * a.input_row_stride : in;  // an empty row: no offset into a null buffer
      const float amax = absmax_to_float<T>(absmax_bits(x, a.k));
      const float bounded = a.scale_ub != nullptr ? std::fminf(amax, *a.scale_ub) : amax;
      const float s = std::fmaxf(bounded / a.fp8_max, a.min_scaling_factor);
      a.scale[r] = s;
      if (a.k > 0) ref::quantize_div<T, F>(x, a.k, s, a.fp8_max, out + r * a.out_row_stride);
    }
  });
}

template <typename T, typename F>
void scaled_fp8_quant_typed(const ScaledFp8QuantArgs& a) {
  switch (a.mode) {
    case ScaledQuantMode::kStatic:
      quantize_rows_per_tensor<T, F>(a, a.scale[0]);
      break;
    case ScaledQuantMode::kDynamicPerTensor: {
      // fl(max|x| / FP8_MAX), no floor (spec 2.2 rule 2).
      const float s = absmax_of_rows(static_cast<const T*>(a.input), a.m, a.k, a.input_row_stride) / a.fp8_max;
      a.scale[0] = s;
      quantize_rows_per_tensor<T, F>(a, s);
      break;
    }
    case ScaledQuantMode::kDynamicPerToken:
      quantize_rows_per_token<T, F>(a);
      break;
  }
}

// Spec 2.2 rule 4; the ue8m0 scale is 2^ceil(log2 s) taken from the bits of s, exact where
// exp2f(ceilf(log2f(s))) can round log2 to an integer just below the true value.
template <typename T, typename F>
void per_token_group_quant_typed(const PerTokenGroupQuantArgs& a) {
  const T* in = static_cast<const T*>(a.input);
  uint8_t* out = static_cast<uint8_t*>(a.out);
  const int64_t groups = a.k / a.group_size;
  parallel_for(a.rows, row_grain(a.k), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      for (int64_t g = 0; g < groups; ++g) {
        const T* x = in + r * a.input_row_stride + g * a.group_size;
        uint8_t* q = out + r * a.out_row_stride + g * a.group_size;
        const float amax = absmax_to_float<T>(absmax_bits(x, a.group_size));
        float s = std::fmaxf(amax, a.eps) / a.fp8_max;
        if (a.use_ue8m0) s = ue8m0_bits_to_float(float_to_ue8m0_bits(s, E8M0Rounding::kUpward));
        a.scale[r * a.scale_row_stride + g * a.scale_group_stride] = s;
        if (s == 0.0f) {
          std::memset(q, 0, size_t(a.group_size));  // eps underflowed: zero codes, as in H2
        } else {
          ref::quantize_div<T, F>(x, a.group_size, s, a.fp8_max, q);
        }
      }
    }
  });
}

}  // namespace

void scaled_fp8_quant_ref(const ScaledFp8QuantArgs& args) {
  ref::dispatch_input_and_format(args.in_dtype, args.out_dtype,
                                 [&](auto t, auto f) { scaled_fp8_quant_typed<decltype(t), decltype(f)>(args); });
  // Padding rows: zero codes, and scale 1 for per-token (the reference leaves both uninitialised).
  auto* out = static_cast<uint8_t*>(args.out);
  for (int64_t r = args.m; r < args.out_rows; ++r) std::memset(out + r * args.out_row_stride, 0, size_t(args.k));
  if (args.mode == ScaledQuantMode::kDynamicPerToken) {
    for (int64_t r = args.m; r < args.out_rows; ++r) args.scale[r] = 1.0f;
  }
}

void per_token_group_quant_ref(const PerTokenGroupQuantArgs& args) {
  ref::dispatch_input_and_format(args.in_dtype, args.out_dtype,
                                 [&](auto t, auto f) { per_token_group_quant_typed<decltype(t), decltype(f)>(args); });
}

}  // namespace fp8kit::ops
