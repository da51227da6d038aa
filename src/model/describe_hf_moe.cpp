// The mixture-of-experts architectures of describe_hf_model, as vLLM's qwen3_moe.py, mixtral.py
// and deepseek_v2.py build them: which decoder layers are sparse, the FusedMoE settings (top-k,
// renormalization, grouped top-k, scoring, correction bias), the router kept as a plain tensor
// (vLLM builds it with quant_config=None), DeepSeek's shared experts and MLA projections.
// Tested by tests/cpu/test_model_loader_moe.cpp.
#include <algorithm>

#include "core/check.h"
#include "io/json_util.h"
#include "model/describe_hf_util.h"

namespace fp8kit::describe {
namespace {

bool listed(const json& config, const char* key, int64_t value) {
  if (!config.contains(key) || !config[key].is_array()) return false;
  return std::any_of(config[key].begin(), config[key].end(),
                     [&](const json& v) { return v.is_number_integer() && v.get<int64_t>() == value; });
}

void add_norms(ModelDescription& d, const std::string& p) {
  for (const char* norm : {"input_layernorm.weight", "post_attention_layernorm.weight"}) d.plain_tensors.push_back(p + norm);
}

// The router ("{block}.gate") and the experts ("{block}.experts") of a sparse block.
MoESpec sparse_block(ModelDescription& d, const std::string& block, int64_t experts, int64_t top_k, int64_t hidden,
                     int64_t intermediate, bool renormalize) {
  MoESpec m;
  m.prefix = block + ".experts";
  m.num_experts = experts;
  m.top_k = top_k;
  m.hidden_size = hidden;
  m.intermediate_size = intermediate;
  m.renormalize = renormalize;
  m.router = block + ".gate.weight";
  d.plain_tensors.push_back(m.router);
  return m;
}

ModelDescription start(const std::string& arch, const json& config) {
  ModelDescription d;
  d.architecture = arch;
  d.dtype = model_dtype(config);
  d.plain_tensors = {"model.embed_tokens.weight", "model.norm.weight"};
  if (!flag(config, "tie_word_embeddings", false)) d.plain_tensors.push_back("lm_head.weight");
  return d;
}

// Qwen3MoeForCausalLM: Qwen3 attention (q_norm, k_norm); layer i is sparse unless listed in
// mlp_only_layers, when num_experts > 0 and (i + 1) % decoder_sparse_step == 0.
ModelDescription qwen3_moe(const json& config) {
  ModelDescription d = start("Qwen3MoeForCausalLM", config);
  add_llama_stacking(d);
  const int64_t hidden = require_int(config, "hidden_size");
  const int64_t layers = layer_count(config, "num_hidden_layers", true);
  const int64_t heads = require_int(config, "num_attention_heads");
  const int64_t kv_heads = optional_int(config, "num_key_value_heads").value_or(heads);
  const int64_t head_dim = int_or(config, "head_dim", hidden / heads);
  const int64_t experts = int_or(config, "num_experts", 0);
  const int64_t step = int_or(config, "decoder_sparse_step", 1);
  const bool bias = flag(config, "attention_bias", false);
  for (int64_t i = 0; i < layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    add_llama_attention(d, p, hidden, heads, kv_heads, head_dim, bias, bias);
    add_norms(d, p);
    d.plain_tensors.push_back(p + "self_attn.q_norm.weight");
    d.plain_tensors.push_back(p + "self_attn.k_norm.weight");
    if (!listed(config, "mlp_only_layers", i) && experts > 0 && step > 0 && (i + 1) % step == 0) {
      d.moes.push_back(sparse_block(d, p + "mlp", experts, require_int(config, "num_experts_per_tok"), hidden,
                                    require_int(config, "moe_intermediate_size"), flag(config, "norm_topk_prob", false)));
    } else {
      add_dense_mlp(d, p + "mlp", hidden, require_int(config, "intermediate_size"), false);
    }
  }
  return d;
}

// MixtralForCausalLM: Llama attention; every layer's block_sparse_moe has num_local_experts
// experts named w1 (gate), w2 (down), w3 (up); top-k weights always renormalized.
ModelDescription mixtral(const json& config) {
  ModelDescription d = start("MixtralForCausalLM", config);
  add_llama_stacking(d);
  const int64_t hidden = require_int(config, "hidden_size");
  const int64_t layers = layer_count(config, "num_hidden_layers", true);
  const int64_t heads = require_int(config, "num_attention_heads");
  const int64_t kv_heads = optional_int(config, "num_key_value_heads").value_or(heads);
  const int64_t head_dim = int_or(config, "head_dim", hidden / heads);
  for (int64_t i = 0; i < layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    add_llama_attention(d, p, hidden, heads, kv_heads, head_dim, false, false);
    add_norms(d, p);
    MoESpec m = sparse_block(d, p + "block_sparse_moe", require_int(config, "num_local_experts"),
                             require_int(config, "num_experts_per_tok"), hidden, require_int(config, "intermediate_size"),
                             true);
    m.gate_proj = "w1";
    m.down_proj = "w2";
    m.up_proj = "w3";
    d.moes.push_back(m);
  }
  return d;
}

// DeepSeek's multi-head latent attention as vLLM's DeepseekV2MLAAttention registers it.
void add_mla_attention(ModelDescription& d, const std::string& p, const json& config, int64_t hidden) {
  const int64_t heads = require_int(config, "num_attention_heads");
  const int64_t nope = require_int(config, "qk_nope_head_dim"), rope = require_int(config, "qk_rope_head_dim");
  const int64_t v_dim = require_int(config, "v_head_dim"), kv_lora = require_int(config, "kv_lora_rank");
  const std::optional<int64_t> q_lora = optional_int(config, "q_lora_rank");
  const std::string a = p + "self_attn.";
  using K = LinearSpec::Kind;
  // Each size is below 2^31, so a sum of two fits; the products are checked.
  const int64_t q_out = size_product(heads, nope + rope, "num_attention_heads x (qk_nope_head_dim + qk_rope_head_dim)");
  const int64_t kv_b_out = size_product(heads, nope + v_dim, "num_attention_heads x (qk_nope_head_dim + v_head_dim)");
  const int64_t o_in = size_product(heads, v_dim, "num_attention_heads x v_head_dim");
  if (q_lora) {
    d.linears.push_back({a + "q_a_proj", K::kReplicated, hidden, *q_lora, {}, 0, 0, 0, false});
    d.plain_tensors.push_back(a + "q_a_layernorm.weight");
    d.linears.push_back({a + "q_b_proj", K::kColumn, *q_lora, q_out, {}, 0, 0, 0, false});
  } else {
    d.linears.push_back({a + "q_proj", K::kColumn, hidden, q_out, {}, 0, 0, 0, false});
  }
  d.linears.push_back({a + "kv_a_proj_with_mqa", K::kReplicated, hidden, kv_lora + rope, {}, 0, 0, 0, false});
  d.plain_tensors.push_back(a + "kv_a_layernorm.weight");
  d.linears.push_back({a + "kv_b_proj", K::kColumn, kv_lora, kv_b_out, {}, 0, 0, 0, false});
  d.linears.push_back({a + "o_proj", K::kRow, o_in, hidden, {}, 0, 0, 0, false});
  // The MLA cache holds the latent kv (kv_lora_rank) and the rope key: one "head" for all.
  d.attentions.push_back({a + "attn", heads, kv_lora + rope, 1});
}

// DeepseekV3ForCausalLM (and V2): layers below first_k_dense_replace (and those off
// moe_layer_freq) are dense; sparse ones have n_routed_experts experts with grouped top-k
// (n_group, topk_group, scoring_func), e_score_correction_bias when topk_method is noaux_tc, and
// n_shared_experts shared experts as one dense MLP of moe_intermediate_size * n_shared_experts.
ModelDescription deepseek(const std::string& arch, const json& config) {
  ModelDescription d = start(arch, config);
  // Only gate/up are stacked: the MLA q_proj is a layer of its own.
  d.packed_modules_mapping = {{"gate_up_proj", {"gate_proj", "up_proj"}}};
  d.stacked_params = {{"gate_up_proj", "gate_proj", int64_t(0)}, {"gate_up_proj", "up_proj", int64_t(1)}};
  const int64_t hidden = require_int(config, "hidden_size");
  const int64_t layers = layer_count(config, "num_hidden_layers", true);
  const int64_t routed = int_or(config, "n_routed_experts", 0);
  const int64_t first_dense = int_or(config, "first_k_dense_replace", 0);
  const int64_t freq = int_or(config, "moe_layer_freq", 1);
  const int64_t nextn = layer_count(config, "num_nextn_predict_layers", false);
  for (int64_t i = 0; i < nextn; ++i) {
    d.ignored_prefixes.push_back("model.layers." + std::to_string(layers + i) + ".");
  }
  for (int64_t i = 0; i < layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    add_mla_attention(d, p, config, hidden);
    add_norms(d, p);
    if (routed == 0 || i < first_dense || freq == 0 || i % freq != 0) {
      add_dense_mlp(d, p + "mlp", hidden, require_int(config, "intermediate_size"), false);
      continue;
    }
    const int64_t moe_inter = require_int(config, "moe_intermediate_size");
    MoESpec m = sparse_block(d, p + "mlp", routed, require_int(config, "num_experts_per_tok"), hidden, moe_inter,
                             flag(config, "norm_topk_prob", false));
    m.use_grouped_topk = true;
    m.num_expert_group = require_int(config, "n_group");
    m.topk_group = require_int(config, "topk_group");
    m.scoring_func = string_or(config, "scoring_func", "softmax");
    if (const auto f = config.find("routed_scaling_factor"); f != config.end() && !f->is_null()) {
      FP8KIT_CHECK_ARG(f->is_number(), "config.json: `routed_scaling_factor` must be a number, got {}",
                       io::json_excerpt(*f));
      m.routed_scaling_factor = f->get<double>();
    }
    if (string_or(config, "topk_method", "") == "noaux_tc") {
      m.e_score_correction_bias = p + "mlp.gate.e_score_correction_bias";
      d.plain_tensors.push_back(m.e_score_correction_bias);
    }
    d.moes.push_back(m);
    if (const int64_t shared = int_or(config, "n_shared_experts", 0); shared > 0) {
      add_dense_mlp(d, p + "mlp.shared_experts", hidden,
                    size_product(moe_inter, shared, "moe_intermediate_size x n_shared_experts"), false);
    }
  }
  return d;
}

}  // namespace

std::optional<ModelDescription> describe_moe_model(const std::string& arch, const json& config) {
  if (arch == "Qwen3MoeForCausalLM") return qwen3_moe(config);
  if (arch == "MixtralForCausalLM") return mixtral(config);
  if (arch == "DeepseekV3ForCausalLM" || arch == "DeepseekV2ForCausalLM") return deepseek(arch, config);
  return std::nullopt;
}

}  // namespace fp8kit::describe
