// The token loop of apply_rope on the CPU, which the reference (rope_ref.cpp) and the fast
// backend (rope_cpu.cpp) share: the tokens in num_parts parts on the thread pool, per token the
// cos/sin of every frequency once (rope_freqs.h), rounded to T (HF's .to(x.dtype), vLLM's
// cos/sin cache in the model dtype), then rotate_heads(a, heads, t, c, s) for q and for k.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/parallel.h"
#include "fp8kit/half.h"
#include "ops/rope/rope_args.h"
#include "ops/rope/rope_freqs.h"

namespace fp8kit::ops::detail {

template <typename T, typename RotateHeads>
void rotate_each_token(const RopeArgs& a, RotateHeads rotate_heads) {
  const int64_t half = a.rotary_dim / 2;
  const int64_t per_part = (a.num_tokens + a.num_parts - 1) / a.num_parts;
  parallel_for(a.num_parts, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t part = p0; part < p1; ++part) {
      float* c = a.scratch + part * a.rotary_dim;  // this part's cos and sin of one token
      float* s = c + half;
      for (int64_t t = part * per_part; t < std::min(a.num_tokens, (part + 1) * per_part); ++t) {
        for (int64_t i = 0; i < half; ++i) {
          rope_cos_sin_at(a.inv_freq[i], a.positions[t], a.attention_factor, c + i, s + i);
          c[i] = to_float(from_float<T>(c[i]));
          s[i] = to_float(from_float<T>(s[i]));
        }
        rotate_heads(a, a.q, t, c, s);
        rotate_heads(a, a.k, t, c, s);
      }
    }
  });
}

}  // namespace fp8kit::ops::detail
