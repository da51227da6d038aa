// CPU reference of the RMS norms (rms_norm_ref.h).
#include "ops/norm/rms_norm_ref.h"

#include <cmath>

#include "core/parallel.h"
#include "fp8kit/half.h"

namespace fp8kit::ops {
namespace {

template <typename T>
float round_to(float v) {
  return to_float(from_float<T>(v));
}

template <typename T>
void run(const RmsNormArgs& a, int num_parts) {
  const auto* weight = static_cast<const T*>(a.weight);
  const int64_t grain = (a.rows + num_parts - 1) / num_parts;
  parallel_for(a.rows, grain, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* x = static_cast<const T*>(a.x) + r * a.x_row_stride;
      T* out = static_cast<T*>(a.out) + r * a.out_row_stride;
      T* residual = a.residual ? static_cast<T*>(a.residual) + r * a.hidden : nullptr;
      // The row the norm reads: x, or the residual stream's new value T(x + residual).
      if (residual) {
        for (int64_t i = 0; i < a.hidden; ++i) residual[i] = from_float<T>(to_float(x[i]) + to_float(residual[i]));
      }
      const T* row = residual ? residual : x;
      double sum_squares = 0.0;  // exact enough that r is the correctly rounded value in practice
      for (int64_t i = 0; i < a.hidden; ++i) {
        const double v = to_float(row[i]);
        sum_squares += v * v;
      }
      const float r_inv = float(1.0 / std::sqrt(sum_squares / double(a.hidden) + double(a.eps)));
      for (int64_t i = 0; i < a.hidden; ++i) {
        out[i] = from_float<T>(round_to<T>(to_float(row[i]) * r_inv) * to_float(weight[i]));
      }
    }
  });
}

}  // namespace

void rms_norm_ref(const RmsNormArgs& args, int num_parts) {
  if (args.rows == 0 || args.hidden == 0) return;
  switch (args.dtype) {
    case DType::kBF16: return run<BFloat16>(args, num_parts);
    case DType::kF16: return run<Float16>(args, num_parts);
    default: return run<float>(args, num_parts);
  }
}

}  // namespace fp8kit::ops
