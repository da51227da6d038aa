// What the describe_hf_*.cpp files share: reading config.json values with errors that name the
// key, and the layer specs every decoder layer of the Llama family has (attention, dense MLP).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "fp8kit/model/model_loader.h"

namespace fp8kit::describe {

using json = nlohmann::ordered_json;

// Typed reads of config.json values: a value of the wrong type or out of range is an Error
// naming config.json, the key and what it must be; absent or null gives the fallback. Sizes are
// at most 2^31 - 1, so the product of two always fits in int64 (size_product checks more).
int64_t require_int(const json& config, const char* key);  // a positive integer
int64_t int_or(const json& config, const char* key, int64_t fallback);  // an integer >= 0, or fallback
std::optional<int64_t> optional_int(const json& config, const char* key);  // a positive integer, or nullopt
bool flag(const json& config, const char* key, bool fallback);
std::string string_or(const json& config, const char* key, const std::string& fallback);
DType model_dtype(const json& config);

// A layer count (num_hidden_layers, num_nextn_predict_layers): at most kMaxLayers, since the
// description holds every layer (100x the deepest published models; 10^9 exhausted memory).
inline constexpr int64_t kMaxLayers = 100000;
int64_t layer_count(const json& config, const char* key, bool required);
// a x b for layer sizes, an Error naming `what` ("num_attention_heads x head_dim") on overflow.
int64_t size_product(int64_t a, int64_t b, const char* what);

// The packed modules and stacked parameters of the fused qkv_proj and gate_up_proj.
void add_llama_stacking(ModelDescription& d);
// qkv_proj, o_proj and the attention layer of decoder layer prefix p ("model.layers.3.").
void add_llama_attention(ModelDescription& d, const std::string& p, int64_t hidden, int64_t heads, int64_t kv_heads,
                         int64_t head_dim, bool qkv_bias, bool o_bias);
// gate_up_proj and down_proj of the MLP at module path `mlp` ("model.layers.3.mlp").
void add_dense_mlp(ModelDescription& d, const std::string& mlp, int64_t hidden, int64_t intermediate, bool bias);

// The MoE architectures (describe_hf_moe.cpp); nullopt when `arch` is none of them.
std::optional<ModelDescription> describe_moe_model(const std::string& arch, const json& config);

}  // namespace fp8kit::describe
