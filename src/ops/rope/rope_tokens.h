// The token loop of apply_rope on the CPU, which the reference (rope_ref.cpp) and the fast
// backend (rope_cpu.cpp) share: the tokens in num_parts parts on the thread pool, per token the
// cos/sin of every frequency once (rope_freqs.h), rounded to T (HF's .to(x.dtype), vLLM's
// cos/sin cache in the model dtype), then rotate(t, c, s) for its heads.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/parallel.h"
#include "fp8kit/half.h"
#include "ops/rope/rope_args.h"
#include "ops/rope/rope_freqs.h"

namespace fp8kit::ops::detail {

template <typename T, typename Rotate>
void for_each_rope_token(const RopeArgs& a, Rotate&& rotate) {
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
        rotate(t, c, s);
      }
    }
  });
}

}  // namespace fp8kit::ops::detail
