// The facts of a decoder-only checkpoint the model runner needs beyond its layers (config.json):
// which architectures it runs, per-layer sliding windows, q/k norms, the RoPE, the norm epsilon,
// tied embeddings, the longest sequence (vLLM's derived max_model_len) and the EOS ids. Parsed
// once, errors name the field. Tested by tests/cpu/test_runner_config.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fp8kit/dtype.h"
#include "fp8kit/ops/rope.h"

namespace fp8kit::runner {

struct DecoderConfig {
  std::string architecture;
  DType dtype = DType::kBF16;  // config.json torch_dtype
  int64_t hidden_size = 0, num_layers = 0, num_heads = 0, num_kv_heads = 0, head_dim = 0, vocab_size = 0;
  float rms_norm_eps = 1e-6f;
  bool qk_norm = false;  // Qwen3 / Qwen3-MoE: RMSNorm of every q and k head before RoPE
  bool tie_word_embeddings = false;
  ops::RopeConfig rope;
  // vLLM's derived max_model_len: max_position_embeddings, times the rope scaling factor for the
  // kinds that extend the context (linear, dynamic; yarn: original_max_position_embeddings x factor).
  int64_t max_model_len = 0;
  std::vector<std::optional<int64_t>> sliding_window;  // per layer: W keys (the query's own included), or none
  std::vector<int32_t> eos_token_ids;                  // config.json's eos_token_id (an int or a list)
};

// The architectures the runner runs, in the order error messages list them.
const std::vector<std::string>& supported_architectures();

// config.json's text -> DecoderConfig. Error(kUnsupported) for another architecture ("model
// architecture 'X' is not supported by the model runner (supported: ...)") or a hidden_act other
// than silu; Error(kInvalidArgument) naming a missing or bad field.
DecoderConfig parse_decoder_config(std::string_view config_json);

}  // namespace fp8kit::runner
