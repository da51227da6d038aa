// The fast CPU rotation of apply_rope (rope_cpu.h): the reference's loop over tokens in parts on
// the thread pool, each head's pairs (i, i + rotary_dim / 2) 8 at a time in AVX2 lanes (the target
// pragma below).
#include "ops/rope/rope_cpu.h"

#include <cstring>

#include "core/cpu_features.h"
#include "fp8kit/half.h"
#include "ops/rope/rope_tokens.h"
#include "ops/rope/rope_ref.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#include "ops/avx2_target_begin.h"

#include "ops/avx2_elements.h"

namespace fp8kit::ops {
namespace {

using avx2::load8;
using avx2::round8;
using avx2::store8;

// Every head of h at token t: pairs (i, i + half) with c[i], s[i] already rounded to T; the dims
// past rotary_dim copied when not in place.
template <typename T>
void rotate_heads(const RopeArgs& a, const RopeHeads& h, int64_t t, const float* c, const float* s) {
  const int64_t half = a.rotary_dim / 2;
  for (int64_t head = 0; head < h.num_heads; ++head) {
    const T* in = static_cast<const T*>(h.in) + t * h.in_token_stride + head * h.in_head_stride;
    T* out = static_cast<T*>(h.out) + t * h.out_token_stride + head * h.out_head_stride;
    for (int64_t i = 0; i < half; i += 8) {
      const __m256 x = load8(in + i), y = load8(in + i + half);
      const __m256 cv = _mm256_loadu_ps(c + i), sv = _mm256_loadu_ps(s + i);
      const __m256 xa = _mm256_sub_ps(round8<T>(_mm256_mul_ps(x, cv)), round8<T>(_mm256_mul_ps(y, sv)));
      const __m256 xb = _mm256_add_ps(round8<T>(_mm256_mul_ps(y, cv)), round8<T>(_mm256_mul_ps(x, sv)));
      store8(out + i, xa);
      store8(out + i + half, xb);
    }
    if (out != in) std::memcpy(out + a.rotary_dim, in + a.rotary_dim, sizeof(T) * size_t(a.head_dim - a.rotary_dim));
  }
}

template <typename T>
void run(const RopeArgs& a) {
  detail::rotate_each_token<T>(a, rotate_heads<T>);
}

}  // namespace

void apply_rope_cpu(const RopeArgs& args, const Overrides& overrides, int) {
  if (overrides.cpu_backend == CpuBackend::kReference || best_cpu_isa() < CpuIsa::kAvx2 || !args.is_neox_style ||
      args.rotary_dim % 16 != 0) {
    return apply_rope_ref(args);
  }
  if (args.num_tokens == 0) return;
  switch (args.dtype) {
    case DType::kBF16: return run<BFloat16>(args);
    case DType::kF16: return run<Float16>(args);
    default: return run<float>(args);
  }
}

}  // namespace fp8kit::ops

#include "ops/avx2_target_end.h"

#else  // not x86-64

namespace fp8kit::ops {
void apply_rope_cpu(const RopeArgs& args, const Overrides&, int) { apply_rope_ref(args); }
}  // namespace fp8kit::ops

#endif
