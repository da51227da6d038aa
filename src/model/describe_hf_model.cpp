// describe_hf_model: the layers of a checkpoint from its config.json, named as vLLM's model
// classes name them (fused qkv_proj and gate_up_proj). The Llama family (LlamaForCausalLM,
// MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM) is here with the shared helpers; the
// MoE architectures are in describe_hf_moe.cpp. Tested by tests/cpu/test_model_loader.cpp and
// tests/cpu/test_model_loader_moe.cpp.
#include <algorithm>

#include "core/check.h"
#include "model/describe_hf_util.h"

namespace fp8kit {
namespace describe {

int64_t require_int(const json& config, const char* key) {
  FP8KIT_CHECK_ARG(config.contains(key) && config[key].is_number_integer() && config[key].get<int64_t>() > 0,
                   "config.json: `{}` must be a positive integer", key);
  return config[key].get<int64_t>();
}

int64_t int_or(const json& config, const char* key, int64_t fallback) {
  if (!config.contains(key) || config[key].is_null()) return fallback;
  FP8KIT_CHECK_ARG(config[key].is_number_integer() && config[key].get<int64_t>() >= 0,
                   "config.json: `{}` must be a non-negative integer", key);
  return config[key].get<int64_t>();
}

std::optional<int64_t> optional_int(const json& config, const char* key) {
  if (!config.contains(key) || config[key].is_null()) return std::nullopt;
  return require_int(config, key);
}

bool flag(const json& config, const char* key, bool fallback) {
  return config.contains(key) && config[key].is_boolean() ? config[key].get<bool>() : fallback;
}

std::string string_or(const json& config, const char* key, const std::string& fallback) {
  return config.contains(key) && config[key].is_string() ? config[key].get<std::string>() : fallback;
}

DType model_dtype(const json& config) {
  for (const char* key : {"torch_dtype", "dtype"}) {
    if (!config.contains(key) || !config[key].is_string()) continue;
    const std::string d = config[key].get<std::string>();
    if (d == "bfloat16") return DType::kBF16;
    if (d == "float16") return DType::kF16;
    if (d == "float32") return DType::kF32;
    fail(ErrorCode::kUnsupported, "config.json: torch_dtype {} is not supported", d);
  }
  return DType::kBF16;
}

void add_llama_stacking(ModelDescription& d) {
  d.packed_modules_mapping = {{"qkv_proj", {"q_proj", "k_proj", "v_proj"}}, {"gate_up_proj", {"gate_proj", "up_proj"}}};
  d.stacked_params = {{"qkv_proj", "q_proj", std::string("q")},
                      {"qkv_proj", "k_proj", std::string("k")},
                      {"qkv_proj", "v_proj", std::string("v")},
                      {"gate_up_proj", "gate_proj", int64_t(0)},
                      {"gate_up_proj", "up_proj", int64_t(1)}};
}

void add_llama_attention(ModelDescription& d, const std::string& p, int64_t hidden, int64_t heads, int64_t kv_heads,
                         int64_t head_dim, bool qkv_bias, bool o_bias) {
  LinearSpec qkv;
  qkv.prefix = p + "self_attn.qkv_proj";
  qkv.kind = LinearSpec::Kind::kQKV;
  qkv.input_size = hidden;
  qkv.head_size = head_dim;
  qkv.num_heads = heads;
  qkv.num_kv_heads = kv_heads;
  qkv.bias = qkv_bias;
  LinearSpec o{p + "self_attn.o_proj", LinearSpec::Kind::kRow, heads * head_dim, hidden, {}, 0, 0, 0, o_bias};
  d.linears.insert(d.linears.end(), {qkv, o});
  d.attentions.push_back({p + "self_attn.attn", heads, head_dim, kv_heads});
}

void add_dense_mlp(ModelDescription& d, const std::string& mlp, int64_t hidden, int64_t intermediate, bool bias) {
  LinearSpec gate_up{mlp + ".gate_up_proj", LinearSpec::Kind::kMergedColumn, hidden, 0, {intermediate, intermediate},
                     0, 0, 0, bias};
  LinearSpec down{mlp + ".down_proj", LinearSpec::Kind::kRow, intermediate, hidden, {}, 0, 0, 0, bias};
  d.linears.insert(d.linears.end(), {gate_up, down});
}

}  // namespace describe

using namespace describe;

ModelDescription describe_hf_model(const json& config) {
  std::string arch;
  if (config.contains("architectures") && config["architectures"].is_array() && !config["architectures"].empty() &&
      config["architectures"][0].is_string()) {
    arch = config["architectures"][0].get<std::string>();
  }
  if (std::optional<ModelDescription> moe = describe_moe_model(arch, config)) return std::move(*moe);
  static const std::vector<std::string> kDense = {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM",
                                                  "Qwen3ForCausalLM"};
  FP8KIT_CHECK(std::find(kDense.begin(), kDense.end(), arch) != kDense.end(), ErrorCode::kUnsupported,
               "model architecture '{}' is not supported yet (supported: LlamaForCausalLM, MistralForCausalLM, "
               "Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen3MoeForCausalLM, MixtralForCausalLM, DeepseekV3ForCausalLM)",
               arch);
  ModelDescription d;
  d.architecture = arch;
  d.dtype = model_dtype(config);
  const int64_t hidden = require_int(config, "hidden_size");
  const int64_t intermediate = require_int(config, "intermediate_size");
  const int64_t layers = require_int(config, "num_hidden_layers");
  const int64_t heads = require_int(config, "num_attention_heads");
  const int64_t kv_heads = config.contains("num_key_value_heads") ? require_int(config, "num_key_value_heads") : heads;
  const int64_t head_dim = config.contains("head_dim") && config["head_dim"].is_number_integer()
                               ? config["head_dim"].get<int64_t>()
                               : hidden / heads;
  const bool qwen2 = arch == "Qwen2ForCausalLM";
  const bool qwen3 = arch == "Qwen3ForCausalLM";
  // Qwen2 has q/k/v biases; Llama's attention_bias covers q/k/v and o; mlp_bias its MLP.
  const bool qkv_bias = qwen2 || flag(config, "attention_bias", false);
  const bool o_bias = !qwen2 && flag(config, "attention_bias", false);
  const bool mlp_bias = flag(config, "mlp_bias", false);

  add_llama_stacking(d);
  d.plain_tensors = {"model.embed_tokens.weight", "model.norm.weight"};
  if (!flag(config, "tie_word_embeddings", false)) d.plain_tensors.push_back("lm_head.weight");
  for (int64_t i = 0; i < layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    add_llama_attention(d, p, hidden, heads, kv_heads, head_dim, qkv_bias, o_bias);
    add_dense_mlp(d, p + "mlp", hidden, intermediate, mlp_bias);
    for (const char* norm : {"input_layernorm.weight", "post_attention_layernorm.weight"}) d.plain_tensors.push_back(p + norm);
    if (qwen3) {
      d.plain_tensors.push_back(p + "self_attn.q_norm.weight");
      d.plain_tensors.push_back(p + "self_attn.k_norm.weight");
    }
  }
  return d;
}

}  // namespace fp8kit
