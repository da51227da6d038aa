// Rotary position embedding (RoPE) as Hugging Face's modeling_rope_utils.py computes the
// frequencies and vLLM's rotary_embedding applies them: rotate-half (neox) or GPT-J interleaved
// pairs, partial rotary dims, and the rope_scaling kinds default, linear, dynamic (NTK), llama3
// and yarn. CPU reference: src/ops/rope/; tests: tests/cpu/test_rope.cpp, test_rope_config.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "fp8kit/runtime/forward_context.h"
#include "fp8kit/tensor.h"

namespace fp8kit::ops {

enum class RopeType : uint8_t { kDefault, kLinear, kDynamic, kLlama3, kYarn };
const char* rope_type_name(RopeType type);  // "default", "linear", "dynamic", "llama3", "yarn"

// The RoPE of one model, from config.json (parse_rope_config) or set by hand.
struct RopeConfig {
  RopeType type = RopeType::kDefault;
  int64_t head_dim = 0;    // the attention head size
  int64_t rotary_dim = 0;  // leading dims of a head that rotate: even, 2..head_dim
  double theta = 10000.0;  // rope_theta
  // Rotate-half pairs (i, i + rotary_dim / 2) (Llama, Qwen, Mistral, NeoX) or GPT-J's (2i, 2i + 1).
  // Not in config.json: the architecture decides (parse_rope_config leaves it true).
  bool is_neox_style = true;
  int64_t max_position_embeddings = 0;                   // dynamic; yarn's default original_max_position_embeddings
  double factor = 1.0;                                   // linear, dynamic, llama3, yarn: >= 1
  int64_t original_max_position_embeddings = 0;          // llama3 (required), yarn
  double low_freq_factor = 1.0, high_freq_factor = 4.0;  // llama3
  double beta_fast = 32.0, beta_slow = 1.0;              // yarn
  std::optional<double> mscale, mscale_all_dim;          // yarn (DeepSeek-style attention factor)
  std::optional<double> attention_factor;                // yarn: overrides the computed one
  bool truncate = true;                                  // yarn: floor/ceil the correction range
};

// Parses the RoPE fields of a config.json text: head_dim (or hidden_size / num_attention_heads),
// rope_theta (default 10000), max_position_embeddings, partial_rotary_factor (in (0, 1]) or
// rotary_dim, and the rope_scaling dict (transformers v5: rope_parameters, which may hold
// rope_theta and partial_rotary_factor) with rope_type (legacy: type), factor,
// original_max_position_embeddings, low_freq_factor, high_freq_factor, beta_fast, beta_slow,
// mscale, mscale_all_dim, attention_factor, truncate. A bad value is Error(kInvalidArgument)
// "config.json: `rope_scaling.factor` must be a number >= 1, got 0.5" (naming the field); a
// rope_type outside the five is "config.json: rope_scaling.rope_type `longrope` is not supported
// (supported: default, linear, dynamic, llama3, yarn)".
RopeConfig parse_rope_config(std::string_view config_json);

// The checks of a RopeConfig made by hand (parse_rope_config's results pass them): every field in
// range, errors naming it ("rope: `rotary_dim` ...").
void validate_rope_config(const RopeConfig& config);

// The inverse frequencies (rotary_dim / 2 of them, f32) and the factor cos and sin are multiplied
// by (yarn's attention factor; 1 otherwise), computed as modeling_rope_utils.py does in f32
// (formulas: docs/numerics.md). dynamic_seq_len: the sequence length HF's dynamic NTK uses
// (base * ((factor * L / max_pos) - (factor - 1))^(d / (d - 2)) with L = max(dynamic_seq_len,
// max_position_embeddings)); 0 (the default) gives L = max_position_embeddings, where the base is
// unchanged: vLLM's fixed table.
struct RopeFrequencies {
  std::vector<float> inv_freq;
  float attention_factor = 1.0f;
};
RopeFrequencies rope_frequencies(const RopeConfig& config, int64_t dynamic_seq_len = 0);

// cos and sin [num_tokens, rotary_dim / 2] f32 of the angles f32(positions[t]) * inv_freq[i]:
// f32(cos(angle)) * attention_factor (cos correctly rounded to f32, then one f32 product), before
// any rounding to a model dtype. positions: i64 [num_tokens] on the CPU, in [0, 2^24] (exact in f32).
struct RopeCosSin {
  Tensor cos, sin;
};
RopeCosSin rope_cos_sin(const ForwardContext& ctx, const RopeConfig& config, const Tensor& positions,
                        int64_t dynamic_seq_len = 0);

// ---------------------------------------------------------------------------------------------
// apply_rope(ctx, config, positions, q, k, options)
//   q [num_tokens, num_heads, head_dim] or [num_tokens, num_heads * head_dim], f32|f16|bf16, last
//   dimension contiguous, any token (and head) stride; k likewise with its own head count, q's
//   dtype, or undefined. For each token t, head, pair (a, b) of rotated dims with frequency i:
//     c = T(cos[t, i]), s = T(sin[t, i])       (rope_cos_sin, rounded to the dtype T)
//     x_a' = T(T(x_a * c) - T(x_b * s)),  x_b' = T(T(x_b * c) + T(x_a * s))
//   (products and sums in f32, each rounded to T: vLLM's kernel on scalar_t and HF's
//   q * cos + rotate_half(q) * sin agree); dims [rotary_dim, head_dim) are copied unchanged.
//   In place unless options.q_out (and options.k_out) are given: contiguous tensors of the
//   inputs' shapes and dtype.
// ---------------------------------------------------------------------------------------------
struct RopeOptions {
  Tensor q_out, k_out;          // out of place when given
  int64_t dynamic_seq_len = 0;  // see rope_frequencies
};
void apply_rope(const ForwardContext& ctx, const RopeConfig& config, const Tensor& positions, const Tensor& q,
                const Tensor& k, const RopeOptions& options = {});

}  // namespace fp8kit::ops
