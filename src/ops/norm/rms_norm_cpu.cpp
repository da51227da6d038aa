// The fast CPU RMS norms (rms_norm_cpu.h): a row at a time, 8 elements a step in AVX2 lanes (the
// target pragma below), the tail through the reference's scalar expressions. Called only where
// best_cpu_isa() has AVX2/FMA/F16C; elsewhere, and with Overrides::cpu_backend = kReference, the
// reference runs.
#include "ops/norm/rms_norm_cpu.h"

#include <algorithm>
#include <cstdint>

#include "core/cpu_features.h"
#include "core/parallel.h"
#include "fp8kit/half.h"
#include "ops/norm/rms_norm_math.h"
#include "ops/norm/rms_norm_ref.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#include "ops/avx2_target_begin.h"

#include "ops/avx2_elements.h"

namespace fp8kit::ops {
namespace {

using avx2::load8;
using avx2::round8;
using avx2::store8;

// norm_math::add of 4 double lanes (TwoSum: hi + lo is the running sum).
inline void add4(__m256d& hi, __m256d& lo, __m256d x) {
  const __m256d t = _mm256_add_pd(hi, x);
  const __m256d b = _mm256_sub_pd(t, hi);
  lo = _mm256_add_pd(lo, _mm256_add_pd(_mm256_sub_pd(hi, _mm256_sub_pd(t, b)), _mm256_sub_pd(x, b)));
  hi = t;
}

template <typename T>
void norm_row(const RmsNormArgs& a, int64_t r) {
  const int64_t n = a.hidden;
  const auto* weight = static_cast<const T*>(a.weight);
  const T* x = static_cast<const T*>(a.x) + r * a.x_row_stride;
  T* out = static_cast<T*>(a.out) + r * a.out_row_stride;
  T* residual = a.residual ? static_cast<T*>(a.residual) + r * a.hidden : nullptr;
  const int64_t n8 = n / 8 * 8;
  if (residual) {
    for (int64_t i = 0; i < n8; i += 8) store8(residual + i, _mm256_add_ps(load8(x + i), load8(residual + i)));
    for (int64_t i = n8; i < n; ++i) residual[i] = from_float<T>(to_float(x[i]) + to_float(residual[i]));
  }
  const T* row = residual ? residual : x;
  // Squares (exact in double) summed as double-doubles in 8 lanes, then merged in lane order.
  __m256d hi[2] = {_mm256_setzero_pd(), _mm256_setzero_pd()}, lo[2] = {_mm256_setzero_pd(), _mm256_setzero_pd()};
  for (int64_t i = 0; i < n8; i += 8) {
    const __m256 v = load8(row + i);
    const __m256d v0 = _mm256_cvtps_pd(_mm256_castps256_ps128(v)), v1 = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
    add4(hi[0], lo[0], _mm256_mul_pd(v0, v0));
    add4(hi[1], lo[1], _mm256_mul_pd(v1, v1));
  }
  alignas(32) double his[8], los[8];
  _mm256_store_pd(his, hi[0]), _mm256_store_pd(his + 4, hi[1]);
  _mm256_store_pd(los, lo[0]), _mm256_store_pd(los + 4, lo[1]);
  norm_math::SquareSum sum;
  for (int k = 0; k < 8; ++k) sum = norm_math::merge(sum, norm_math::SquareSum{his[k], los[k]});
  for (int64_t i = n8; i < n; ++i) norm_math::add_square(sum, to_float(row[i]));
  const float r_inv = norm_math::inverse_rms(sum, n, a.eps);
  const __m256 rv = _mm256_set1_ps(r_inv);
  for (int64_t i = 0; i < n8; i += 8) {
    store8(out + i, _mm256_mul_ps(round8<T>(_mm256_mul_ps(load8(row + i), rv)), load8(weight + i)));
  }
  for (int64_t i = n8; i < n; ++i) {
    out[i] = from_float<T>(to_float(from_float<T>(to_float(row[i]) * r_inv)) * to_float(weight[i]));
  }
}

template <typename T>
void run(const RmsNormArgs& a, int num_threads) {
  // Rows of a few thousand elements take microseconds: a decode step's one row stays on the
  // calling thread.
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(a.hidden, 1));
  parallel_for_at_most(num_threads, a.rows, grain, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) norm_row<T>(a, r);
  });
}

}  // namespace

void rms_norm_cpu(const RmsNormArgs& args, const Overrides& overrides, int num_threads) {
  if (overrides.cpu_backend == CpuBackend::kReference || best_cpu_isa() < CpuIsa::kAvx2) return rms_norm_ref(args);
  if (args.rows == 0 || args.hidden == 0) return;
  switch (args.dtype) {
    case DType::kBF16: return run<BFloat16>(args, num_threads);
    case DType::kF16: return run<Float16>(args, num_threads);
    default: return run<float>(args, num_threads);
  }
}

}  // namespace fp8kit::ops

#include "ops/avx2_target_end.h"

#else  // not x86-64

namespace fp8kit::ops {
void rms_norm_cpu(const RmsNormArgs& args, const Overrides&, int) { rms_norm_ref(args); }
}  // namespace fp8kit::ops

#endif
