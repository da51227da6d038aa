// parse_decoder_config (decoder_config.h): what config.json says about a decoder-only model beyond
// its layers, read the way vLLM's model classes and model config read it (sliding windows as
// transformers' Mistral / Qwen2 / Qwen3 layers choose them). Tested by
// tests/cpu/test_runner_config.cpp.
#include "model/runner/decoder_config.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/check.h"

namespace fp8kit::runner {
namespace {

using json = nlohmann::ordered_json;

int64_t positive(const json& c, const char* key) {
  FP8KIT_CHECK_ARG(c.contains(key) && c[key].is_number_integer() && c[key].get<int64_t>() > 0,
                   "config.json: `{}` must be a positive integer", key);
  return c[key].get<int64_t>();
}

std::optional<int64_t> optional_positive(const json& c, const char* key) {
  if (!c.contains(key) || c[key].is_null()) return std::nullopt;
  return positive(c, key);
}

bool flag(const json& c, const char* key) { return c.contains(key) && c[key].is_boolean() && c[key].get<bool>(); }

DType torch_dtype(const json& c) {
  for (const char* key : {"torch_dtype", "dtype"}) {
    if (!c.contains(key) || !c[key].is_string()) continue;
    const std::string d = c[key].get<std::string>();
    if (d == "bfloat16") return DType::kBF16;
    if (d == "float16") return DType::kF16;
    if (d == "float32") return DType::kF32;
    fail(ErrorCode::kUnsupported, "config.json: torch_dtype {} is not supported", d);
  }
  return DType::kBF16;
}

// Per layer, as transformers' attention layers pick it (tests/python/reference_forward.py does the
// same): Mistral and Mixtral every layer; Qwen2 / Qwen3 only with use_sliding_window, by
// layer_types or from max_window_layers on; Qwen3-MoE every layer with use_sliding_window; Llama none.
std::vector<std::optional<int64_t>> sliding_windows(const json& c, const std::string& arch, int64_t layers) {
  const std::optional<int64_t> window = optional_positive(c, "sliding_window");
  std::vector<std::optional<int64_t>> out(static_cast<size_t>(layers));
  if (arch == "MistralForCausalLM" || arch == "MixtralForCausalLM") {
    std::fill(out.begin(), out.end(), window);
    return out;
  }
  if (arch == "LlamaForCausalLM" || !flag(c, "use_sliding_window") || !window) return out;
  if (c.contains("layer_types") && c["layer_types"].is_array() && !c["layer_types"].empty()) {
    const json& types = c["layer_types"];
    FP8KIT_CHECK_ARG(int64_t(types.size()) == layers, "config.json: `layer_types` has {} entries for {} layers",
                     types.size(), layers);
    for (int64_t i = 0; i < layers; ++i) {
      if (types[size_t(i)] == "sliding_attention") out[size_t(i)] = window;
    }
    return out;
  }
  if (arch == "Qwen3MoeForCausalLM") {
    std::fill(out.begin(), out.end(), window);
    return out;
  }
  const int64_t first = c.contains("max_window_layers") && c["max_window_layers"].is_number_integer()
                            ? c["max_window_layers"].get<int64_t>()
                            : layers;
  for (int64_t i = std::max<int64_t>(first, 0); i < layers; ++i) out[size_t(i)] = window;
  return out;
}

// vLLM's _get_and_verify_max_len for these models: max_position_embeddings (2048 when absent),
// scaled by the rope factor unless the kind keeps the context (default, llama3).
int64_t derived_max_model_len(const json& c, const ops::RopeConfig& rope) {
  const int64_t max_pos = c.contains("max_position_embeddings") ? positive(c, "max_position_embeddings") : 2048;
  switch (rope.type) {
    case ops::RopeType::kLinear:
    case ops::RopeType::kDynamic:
      return int64_t(double(max_pos) * rope.factor);
    case ops::RopeType::kYarn:
      return int64_t(double(rope.original_max_position_embeddings > 0 ? rope.original_max_position_embeddings : max_pos) *
                     rope.factor);
    default:
      return max_pos;
  }
}

std::vector<int32_t> eos_ids(const json& c) {
  std::vector<int32_t> ids;
  if (!c.contains("eos_token_id") || c["eos_token_id"].is_null()) return ids;
  const json& e = c["eos_token_id"];
  const auto add = [&](const json& v) {
    FP8KIT_CHECK_ARG(v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= INT32_MAX,
                     "config.json: `eos_token_id` must be a token id or a list of them");
    ids.push_back(v.get<int32_t>());
  };
  if (e.is_array()) {
    for (const json& v : e) add(v);
  } else {
    add(e);
  }
  return ids;
}

}  // namespace

const std::vector<std::string>& supported_architectures() {
  static const std::vector<std::string> kArchitectures = {"LlamaForCausalLM",  "MistralForCausalLM",
                                                          "Qwen2ForCausalLM",  "Qwen3ForCausalLM",
                                                          "Qwen3MoeForCausalLM", "MixtralForCausalLM"};
  return kArchitectures;
}

DecoderConfig parse_decoder_config(std::string_view text) {
  json c;
  try {
    c = json::parse(text);
  } catch (const json::exception& e) {
    fail(ErrorCode::kInvalidArgument, "config.json is not valid JSON: {}", e.what());
  }
  FP8KIT_CHECK_ARG(c.is_object(), "config.json must be a JSON object");
  DecoderConfig d;
  if (c.contains("architectures") && c["architectures"].is_array() && !c["architectures"].empty() &&
      c["architectures"][0].is_string()) {
    d.architecture = c["architectures"][0].get<std::string>();
  }
  const auto& known = supported_architectures();
  if (std::find(known.begin(), known.end(), d.architecture) == known.end()) {
    std::string list;
    for (const std::string& a : known) list += (list.empty() ? "" : ", ") + a;
    fail(ErrorCode::kUnsupported, "model architecture '{}' is not supported by the model runner (supported: {})",
         d.architecture, list);
  }
  const std::string act = c.contains("hidden_act") && c["hidden_act"].is_string() ? c["hidden_act"].get<std::string>()
                                                                                  : "silu";
  FP8KIT_CHECK(act == "silu", ErrorCode::kUnsupported, "config.json: hidden_act '{}' is not supported (only silu)", act);
  d.dtype = torch_dtype(c);
  d.hidden_size = positive(c, "hidden_size");
  d.num_layers = positive(c, "num_hidden_layers");
  d.num_heads = positive(c, "num_attention_heads");
  d.num_kv_heads = c.contains("num_key_value_heads") ? positive(c, "num_key_value_heads") : d.num_heads;
  d.head_dim = c.contains("head_dim") && !c["head_dim"].is_null() ? positive(c, "head_dim") : d.hidden_size / d.num_heads;
  d.vocab_size = positive(c, "vocab_size");
  if (c.contains("rms_norm_eps")) {
    FP8KIT_CHECK_ARG(c["rms_norm_eps"].is_number() && c["rms_norm_eps"].get<double>() >= 0,
                     "config.json: `rms_norm_eps` must be a non-negative number");
    d.rms_norm_eps = c["rms_norm_eps"].get<float>();
  }
  d.qk_norm = d.architecture == "Qwen3ForCausalLM" || d.architecture == "Qwen3MoeForCausalLM";
  d.tie_word_embeddings = flag(c, "tie_word_embeddings");
  d.rope = ops::parse_rope_config(text);
  d.rope.is_neox_style = true;  // every architecture here rotates halves (vLLM's is_neox_style=True)
  FP8KIT_CHECK_ARG(d.rope.head_dim == d.head_dim, "config.json: the rope head size {} is not head_dim {}",
                   d.rope.head_dim, d.head_dim);
  d.max_model_len = derived_max_model_len(c, d.rope);
  d.sliding_window = sliding_windows(c, d.architecture, d.num_layers);
  d.eos_token_ids = eos_ids(c);
  return d;
}

}  // namespace fp8kit::runner
