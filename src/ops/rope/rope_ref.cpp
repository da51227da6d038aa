// CPU reference of apply_rope (rope_ref.h).
#include "ops/rope/rope_ref.h"

#include <algorithm>
#include <cstring>

#include "core/parallel.h"
#include "fp8kit/half.h"
#include "ops/rope/rope_tokens.h"

namespace fp8kit::ops {
namespace {

template <typename T>
float rounded(float v) {
  return to_float(from_float<T>(v));
}

// Rotates one head: pairs (i, i + rot / 2) (neox) or (2i, 2i + 1) (GPT-J) with c[i], s[i] already
// rounded to T; the other dims are copied.
template <typename T>
void rotate_head(const RopeArgs& a, const T* in, T* out, const float* c, const float* s) {
  const int64_t half = a.rotary_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const int64_t ia = a.is_neox_style ? i : 2 * i;
    const int64_t ib = a.is_neox_style ? i + half : 2 * i + 1;
    const float x = to_float(in[ia]), y = to_float(in[ib]);
    const float xa = rounded<T>(rounded<T>(x * c[i]) - rounded<T>(y * s[i]));
    const float xb = rounded<T>(rounded<T>(y * c[i]) + rounded<T>(x * s[i]));
    out[ia] = from_float<T>(xa);
    out[ib] = from_float<T>(xb);
  }
  if (out != in) std::memcpy(out + a.rotary_dim, in + a.rotary_dim, sizeof(T) * (a.head_dim - a.rotary_dim));
}

template <typename T>
void rotate_heads(const RopeArgs& a, const RopeHeads& h, int64_t t, const float* c, const float* s) {
  for (int64_t head = 0; head < h.num_heads; ++head) {
    const T* in = static_cast<const T*>(h.in) + t * h.in_token_stride + head * h.in_head_stride;
    T* out = static_cast<T*>(h.out) + t * h.out_token_stride + head * h.out_head_stride;
    rotate_head(a, in, out, c, s);
  }
}

template <typename T>
void run(const RopeArgs& a) {
  detail::rotate_each_token<T>(a, rotate_heads<T>);
}

}  // namespace

void apply_rope_ref(const RopeArgs& args) {
  if (args.num_tokens == 0) return;
  switch (args.dtype) {
    case DType::kBF16: return run<BFloat16>(args);
    case DType::kF16: return run<Float16>(args);
    default: return run<float>(args);
  }
}

}  // namespace fp8kit::ops
