// Argument block of apply_rope (include/fp8kit/ops/rope.h), validated by rope.cpp: the
// frequencies (host-computed, rotary_dim / 2 floats), positions, and up to two head arrays (q and
// k) with their strides. The CPU reference (rope_ref.h) takes it, and a CUDA launcher will take
// the same struct (computing cos/sin per token from inv_freq as the reference does).
#pragma once

#include <cstdint>

#include "fp8kit/dtype.h"

namespace fp8kit::ops {

// One tensor of heads: [num_tokens, num_heads, head_dim], read at `in`, written at `out` (equal
// when in place).
struct RopeHeads {
  const void* in = nullptr;
  int64_t in_token_stride = 0, in_head_stride = 0;
  void* out = nullptr;
  int64_t out_token_stride = 0, out_head_stride = 0;
  int64_t num_heads = 0;
};

struct RopeArgs {
  int64_t num_tokens = 0;
  int64_t head_dim = 0, rotary_dim = 0;
  bool is_neox_style = true;
  const float* inv_freq = nullptr;  // [rotary_dim / 2]
  float attention_factor = 1.0f;
  const int64_t* positions = nullptr;  // [num_tokens]
  DType dtype = DType::kBF16;          // f32 | f16 | bf16 of q and k
  RopeHeads q, k;                      // k.num_heads == 0: no k
  float* scratch = nullptr;            // reference: num_parts rows of rotary_dim floats (cos, sin)
  int num_parts = 1;
};

}  // namespace fp8kit::ops
