// describe_hf_model: the layers of a checkpoint from its config.json, named as vLLM's model
// classes name them (fused qkv_proj and gate_up_proj). The Llama family (LlamaForCausalLM,
// MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM) is here with the shared helpers; the
// MoE architectures are in describe_hf_moe.cpp. Tested by tests/cpu/test_model_loader.cpp and
// tests/cpu/test_model_loader_moe.cpp.
#include <algorithm>

#include "core/check.h"
#include "core/checked_math.h"
#include "core/names.h"
#include "io/json_util.h"
#include "model/describe_hf_util.h"

namespace fp8kit {
namespace describe {

namespace {

// Sizes above this are no real model's (they would be weights of 2^31 rows); below it, the
// product of two sizes always fits in int64.
constexpr int64_t kMaxSize = (int64_t(1) << 31) - 1;

// The integer at `key`, or nullopt when absent or null; a value of another type, or one out of
// [least, kMaxSize], is an error naming config.json, the key and what it must be.
std::optional<int64_t> read_int(const json& config, const char* key, int64_t least) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  // nlohmann keeps a non-negative integer of a file as unsigned (above INT64_MAX too).
  const bool in_range = it->is_number_integer() &&
                        (it->is_number_unsigned() ? it->get<uint64_t>() <= uint64_t(kMaxSize) &&
                                                        it->get<uint64_t>() >= uint64_t(least)
                                                  : it->get<int64_t>() >= least && it->get<int64_t>() <= kMaxSize);
  FP8KIT_CHECK_ARG(in_range, "config.json: `{}` must be {} integer up to {}, got {}", key,
                   least > 0 ? "a positive" : "a non-negative", kMaxSize, io::json_excerpt(*it));
  return it->get<int64_t>();
}

}  // namespace

int64_t require_int(const json& config, const char* key) {
  const std::optional<int64_t> v = read_int(config, key, 1);
  FP8KIT_CHECK_ARG(v.has_value(), "config.json: `{}` must be a positive integer", key);
  return *v;
}

int64_t int_or(const json& config, const char* key, int64_t fallback) {
  return read_int(config, key, 0).value_or(fallback);
}

std::optional<int64_t> optional_int(const json& config, const char* key) { return read_int(config, key, 1); }

int64_t layer_count(const json& config, const char* key, bool required) {
  const int64_t n = required ? require_int(config, key) : int_or(config, key, 0);
  FP8KIT_CHECK_ARG(n <= kMaxLayers, "config.json: `{}` is {}, more layers than fp8kit describes (at most {})", key, n,
                   kMaxLayers);
  return n;
}

int64_t size_product(int64_t a, int64_t b, const char* what) {
  return checked_mul(a, b, std::string("config.json: ") + what);
}

bool flag(const json& config, const char* key, bool fallback) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return fallback;
  FP8KIT_CHECK_ARG(it->is_boolean(), "config.json: `{}` must be true or false, got {}", key, io::json_excerpt(*it));
  return it->get<bool>();
}

std::string string_or(const json& config, const char* key, const std::string& fallback) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return fallback;
  FP8KIT_CHECK_ARG(it->is_string(), "config.json: `{}` must be a string, got {}", key, io::json_excerpt(*it));
  return it->get<std::string>();
}

DType model_dtype(const json& config) {
  for (const char* key : {"torch_dtype", "dtype"}) {
    const std::string d = string_or(config, key, "");
    if (d.empty()) continue;
    if (d == "bfloat16") return DType::kBF16;
    if (d == "float16") return DType::kF16;
    if (d == "float32") return DType::kF32;
    fail(ErrorCode::kUnsupported, "config.json: torch_dtype {} is not supported", quote_name(d));
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
  const int64_t o_input = size_product(heads, head_dim, "num_attention_heads x head_dim");
  (void)size_product(heads + 2 * kv_heads, head_dim, "(num_attention_heads + 2 x num_key_value_heads) x head_dim");
  LinearSpec o{p + "self_attn.o_proj", LinearSpec::Kind::kRow, o_input, hidden, {}, 0, 0, 0, o_bias};
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
  if (const auto a = config.find("architectures"); a != config.end() && !a->is_null()) {
    FP8KIT_CHECK_ARG(a->is_array() && !a->empty() && (*a)[0].is_string(),
                     "config.json: `architectures` must be a list of strings, got {}", io::json_excerpt(*a));
    arch = (*a)[0].get<std::string>();
  }
  if (std::optional<ModelDescription> moe = describe_moe_model(arch, config)) return std::move(*moe);
  static const std::vector<std::string> kDense = {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM",
                                                  "Qwen3ForCausalLM"};
  FP8KIT_CHECK(std::find(kDense.begin(), kDense.end(), arch) != kDense.end(), ErrorCode::kUnsupported,
               "model architecture {} is not supported yet (supported: LlamaForCausalLM, MistralForCausalLM, "
               "Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen3MoeForCausalLM, MixtralForCausalLM, DeepseekV3ForCausalLM)",
               quote_name(arch));
  ModelDescription d;
  d.architecture = arch;
  d.dtype = model_dtype(config);
  const int64_t hidden = require_int(config, "hidden_size");
  const int64_t intermediate = require_int(config, "intermediate_size");
  const int64_t layers = layer_count(config, "num_hidden_layers", true);
  const int64_t heads = require_int(config, "num_attention_heads");
  const int64_t kv_heads = optional_int(config, "num_key_value_heads").value_or(heads);
  const int64_t head_dim = int_or(config, "head_dim", hidden / heads);
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
