// CPU reference of moe_sum (moe_sum_ref.h); rows in parallel.
#include "ops/moe/moe_sum_ref.h"

#include "core/parallel.h"
#include "fp8kit/half.h"

namespace fp8kit::ops {
namespace {

float widen(float v) { return v; }
float widen(BFloat16 v) { return bf16_to_float(v); }
float widen(Float16 v) { return f16_to_float(v); }

template <typename T>
T narrow(float v);
template <>
float narrow<float>(float v) { return v; }
template <>
BFloat16 narrow<BFloat16>(float v) { return float_to_bf16(v); }
template <>
Float16 narrow<Float16>(float v) { return float_to_f16(v); }

template <typename T>
void run(const MoeSumArgs& a) {
  const auto* in = static_cast<const T*>(a.input);
  auto* out = static_cast<T*>(a.out);
  parallel_for(a.m, 16, [&](int64_t m0, int64_t m1) {
    for (int64_t t = m0; t < m1; ++t) {
      const T* rows = in + t * a.top_k * a.d;
      for (int64_t i = 0; i < a.d; ++i) {
        float x = 0.0f;
        if (a.accumulate_in_scalar) {
          // T x = 0; x += in[k]: T + T is computed in f32 (exact enough for one add) and rounded.
          for (int64_t k = 0; k < a.top_k; ++k) x = widen(narrow<T>(x + widen(rows[k * a.d + i])));
        } else {
          for (int64_t k = 0; k < a.top_k; ++k) x += widen(rows[k * a.d + i]);
        }
        out[t * a.d + i] = narrow<T>(x);
      }
    }
  });
}

}  // namespace

void moe_sum_ref(const MoeSumArgs& args) {
  switch (args.dtype) {
    case DType::kBF16: return run<BFloat16>(args);
    case DType::kF16: return run<Float16>(args);
    default: return run<float>(args);
  }
}

}  // namespace fp8kit::ops
