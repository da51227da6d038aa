// What a checkpoint tensor name says about its role: which module it belongs to, whether that
// module is an embedding, a norm, a router, lm_head or a linear layer, which fused module its
// shards form in vLLM (q/k/v -> qkv_proj, gate/up -> gate_up_proj, expert w1/w3 -> w13), and
// whether it is a quantization scale. Shared by quantize, dequantize and inspect.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace fp8kit::convert {

// "model.layers.0.mlp.down_proj.weight" -> "model.layers.0.mlp.down_proj"; nullopt when the
// name does not end in `suffix`.
std::optional<std::string> strip_suffix(std::string_view name, std::string_view suffix);
// The last dot-separated component: "model.layers.0.mlp.gate" -> "gate".
std::string_view last_component(std::string_view module);

enum class ModuleKind {
  kLinear,      // an ordinary linear layer: quantized
  kEmbedding,   // embed_tokens, wte, wpe, ...: never quantized
  kNorm,        // *norm*, ln_*: never quantized
  kRouter,      // MoE router (mlp.gate, router, shared_expert_gate): kept unquantized, listed as ignored
  kLmHead,      // lm_head: quantized only on request
};
ModuleKind module_kind(std::string_view module);

// Whether the module is one expert of a mixture-of-experts layer ("...experts.7.w1").
bool is_expert_module(std::string_view module);

// The fused module a linear shard becomes in vLLM, e.g. q_proj -> {"...self_attn", "qkv_proj"}.
struct FusedGroup {
  std::string key;      // parent module + "/" + fused name: identifies the group
  std::string fused;    // "qkv_proj", "gate_up_proj", "w13"
};
std::optional<FusedGroup> fused_group_of(std::string_view module);

// Tensor names of quantization parameters.
bool is_weight_scale_name(std::string_view name);  // *.weight_scale, *.weight_scale_inv
bool is_input_scale_name(std::string_view name);   // *.input_scale
bool is_kv_scale_name(std::string_view name);      // k/v/q/prob scales in every naming scheme

}  // namespace fp8kit::convert
