// rope_frequencies (include/fp8kit/ops/rope.h): the inverse frequencies of each rope_scaling kind
// with the f32 steps of Hugging Face's modeling_rope_utils.py (torch evaluates tensor expressions
// in f32, Python scalars in double and casts them to f32 where they meet a tensor). f32 pow is
// computed in double and rounded once. Tested by tests/cpu/test_rope.cpp (goldens from numpy).
#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "fp8kit/ops/rope.h"

namespace fp8kit::ops {
namespace {

constexpr double kPi = 3.141592653589793;

float pow_f32(float base, float exponent) { return float(std::pow(double(base), double(exponent))); }

// base ** (arange(0, dim, 2).float() / dim), element i.
float pos_freq(float base, int64_t i, int64_t dim) { return pow_f32(base, float(2 * i) / float(dim)); }

// _compute_default_rope_parameters: 1 / base^(2i / dim).
std::vector<float> default_inv_freq(float base, int64_t dim) {
  std::vector<float> inv(size_t(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) inv[size_t(i)] = 1.0f / pos_freq(base, i, dim);
  return inv;
}

// _compute_llama3_parameters.
std::vector<float> llama3_inv_freq(const RopeConfig& c) {
  std::vector<float> inv = default_inv_freq(float(c.theta), c.rotary_dim);
  const double old_len = double(c.original_max_position_embeddings);
  const float low_wavelen = float(old_len / c.low_freq_factor), high_wavelen = float(old_len / c.high_freq_factor);
  const float factor = float(c.factor), two_pi = float(2 * kPi);
  const float low = float(c.low_freq_factor), span = float(c.high_freq_factor - c.low_freq_factor);
  for (float& f : inv) {
    const float wavelen = two_pi / f;
    const float scaled = wavelen > low_wavelen ? f / factor : f;  // low frequencies: divided by factor
    const float smooth = (float(old_len) / wavelen - low) / span;
    const float smoothed = (1.0f - smooth) * scaled / factor + smooth * scaled;
    const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
    f = medium ? smoothed : scaled;
  }
  return inv;
}

// _compute_yarn_parameters (transformers v5 / vLLM: `factor` as configured).
std::vector<float> yarn_inv_freq(const RopeConfig& c) {
  const int64_t dim = c.rotary_dim;
  const double base = c.theta, orig = double(c.original_max_position_embeddings);
  auto correction_dim = [&](double rotations) {
    return (double(dim) * std::log(orig / (rotations * 2 * kPi))) / (2 * std::log(base));
  };
  double low = correction_dim(c.beta_fast), high = correction_dim(c.beta_slow);
  if (c.truncate) low = std::floor(low), high = std::ceil(high);
  low = std::max(low, 0.0);
  high = std::min(high, double(dim - 1));
  if (low == high) high += 0.001;  // prevent the singularity, as HF does
  const float low_f = float(low), span = float(high - low), factor = float(c.factor);
  std::vector<float> inv(size_t(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) {
    const float pos = pos_freq(float(base), i, dim);
    const float extrapolation = 1.0f / pos, interpolation = 1.0f / (factor * pos);
    const float ramp = std::clamp((float(i) - low_f) / span, 0.0f, 1.0f);
    const float extrapolation_factor = 1.0f - ramp;
    inv[size_t(i)] = interpolation * (1.0f - extrapolation_factor) + extrapolation * extrapolation_factor;
  }
  return inv;
}

double yarn_get_mscale(double scale, double mscale) { return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

double yarn_attention_factor(const RopeConfig& c) {
  if (c.attention_factor) return *c.attention_factor;
  // HF: `if mscale and mscale_all_dim` (Python truthiness: absent and 0 are false).
  if (c.mscale.value_or(0.0) != 0.0 && c.mscale_all_dim.value_or(0.0) != 0.0) {
    return yarn_get_mscale(c.factor, *c.mscale) / yarn_get_mscale(c.factor, *c.mscale_all_dim);
  }
  return yarn_get_mscale(c.factor, 1.0);
}

}  // namespace

RopeFrequencies rope_frequencies(const RopeConfig& c, int64_t dynamic_seq_len) {
  validate_rope_config(c);
  FP8KIT_CHECK_ARG(dynamic_seq_len >= 0, "rope: `dynamic_seq_len` must be non-negative, got {}", dynamic_seq_len);
  RopeFrequencies f;
  switch (c.type) {
    case RopeType::kDefault: f.inv_freq = default_inv_freq(float(c.theta), c.rotary_dim); break;
    case RopeType::kLinear:
      f.inv_freq = default_inv_freq(float(c.theta), c.rotary_dim);
      for (float& x : f.inv_freq) x /= float(c.factor);
      break;
    case RopeType::kDynamic: {
      const double max_pos = double(c.max_position_embeddings);
      const double seq_len = std::max(double(dynamic_seq_len), max_pos);
      const double dim = double(c.rotary_dim);
      const double base = c.theta * std::pow(c.factor * seq_len / max_pos - (c.factor - 1), dim / (dim - 2));
      f.inv_freq = default_inv_freq(float(base), c.rotary_dim);
      break;
    }
    case RopeType::kLlama3: f.inv_freq = llama3_inv_freq(c); break;
    case RopeType::kYarn:
      f.inv_freq = yarn_inv_freq(c);
      f.attention_factor = float(yarn_attention_factor(c));
      break;
  }
  return f;
}

}  // namespace fp8kit::ops
