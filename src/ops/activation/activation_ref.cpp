// CPU reference of the gated activations (activation_ref.h); rows in parallel.
#include "ops/activation/activation_ref.h"

#include <cmath>

#include "core/parallel.h"
#include "fp8kit/half.h"

namespace fp8kit::ops {
namespace {

// Rounds a float to T and back: the value a T-typed intermediate holds.
template <typename T>
float round_to(float v);
template <>
float round_to<float>(float v) { return v; }
template <>
float round_to<BFloat16>(float v) { return bf16_to_float(float_to_bf16(v)); }
template <>
float round_to<Float16>(float v) { return f16_to_float(float_to_f16(v)); }

float widen(float v) { return v; }
float widen(BFloat16 v) { return bf16_to_float(v); }
float widen(Float16 v) { return f16_to_float(v); }

void narrow_into(float v, float* p) { *p = v; }
void narrow_into(float v, BFloat16* p) { *p = float_to_bf16(v); }
void narrow_into(float v, Float16* p) { *p = float_to_f16(v); }

template <typename T>
void run(const ActAndMulArgs& a) {
  const auto* x = static_cast<const T*>(a.x);
  auto* out = static_cast<T*>(a.out);
  const bool silu = a.activation == GatedActivation::kSilu;
  parallel_for(a.rows, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* row = x + r * a.ldx;
      for (int64_t i = 0; i < a.d; ++i) {
        const float gate = widen(row[i]);
        const float act = round_to<T>(silu ? silu_f32(gate) : gelu_f32(gate));
        // For bf16/f16 the product of two T values is exact in f32, so one rounding to T equals
        // the kernel's T * T.
        narrow_into(act * widen(row[a.d + i]), out + r * a.ldo + i);
      }
    }
  });
}

}  // namespace

float silu_f32(float x) { return x / (1.0f + std::exp(-x)); }

// vLLM: f * 0.5f * (1.0f + erf(f * M_SQRT1_2)), evaluated left to right in f32.
float gelu_f32(float x) { return x * 0.5f * (1.0f + std::erf(x * float(M_SQRT1_2))); }

void act_and_mul_ref(const ActAndMulArgs& args) {
  switch (args.dtype) {
    case DType::kBF16: return run<BFloat16>(args);
    case DType::kF16: return run<Float16>(args);
    default: return run<float>(args);
  }
}

}  // namespace fp8kit::ops
