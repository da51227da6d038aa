// RoPE frequencies and the cos/sin of one angle, shared by the public rope_frequencies /
// rope_cos_sin (rope.cpp) and the reference (rope_ref.cpp). Formulas: docs/numerics.md (HF's
// modeling_rope_utils.py in f32). Tested by tests/cpu/test_rope.cpp.
#pragma once

#include <cmath>
#include <cstdint>

#include "fp8kit/ops/rope.h"

namespace fp8kit::ops::detail {

// f32(cos(angle)) * attention_factor and the same for sin, angle = f32(position) * inv_freq (one
// f32 product, as HF's inv_freq @ position_ids and vLLM's einsum give it).
inline void rope_cos_sin_at(float inv_freq, int64_t position, float attention_factor, float* c, float* s) {
  const float angle = float(position) * inv_freq;
  *c = float(std::cos(double(angle))) * attention_factor;
  *s = float(std::sin(double(angle))) * attention_factor;
}

}  // namespace fp8kit::ops::detail
