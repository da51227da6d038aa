// Loading a Hugging Face checkpoint into fp8kit layers, as vLLM's model loader does (spec 1.1,
// 1.12, 1.13, 4): describe the model's layers from config.json, create them with the
// checkpoint's quantization config (or online FP8 for a 16-bit checkpoint), map every checkpoint
// tensor to (layer, parameter, shard) through the stacked-parameter mapping (q/k/v -> qkv_proj,
// gate/up -> gate_up_proj), the expert mapping (experts.{e}.gate_proj -> experts.w13_*, shard w1
// of expert e) and the KV-scale names, call the weight loaders, then every linear and MoE
// layer's process_weights_after_loading, then the attention layers'. Unexpected, missing or
// mis-shaped tensors are errors naming the tensor and what was expected. Tensors are read from
// the memory-mapped shards one at a time and copied straight to the layers' device; a layer is
// post-processed as soon as its last tensor is in, so online quantization holds one layer in 16 bits.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>  // not json.hpp: it costs each file that includes it ~1.7 s to compile

#include "fp8kit/layers/attention.h"
#include "fp8kit/layers/fused_moe.h"
#include "fp8kit/layers/linear.h"
#include "fp8kit/layers/quantization_config.h"
#include "fp8kit/runtime/overrides.h"

namespace fp8kit {

// One linear layer of the model, by its engine module path.
struct LinearSpec {
  enum class Kind { kReplicated, kColumn, kMergedColumn, kQKV, kRow };
  std::string prefix;  // "model.layers.0.self_attn.qkv_proj"
  Kind kind = Kind::kColumn;
  int64_t input_size = 0;
  int64_t output_size = 0;            // kReplicated, kColumn, kRow
  std::vector<int64_t> output_sizes;  // kMergedColumn: every stacked layer's full output size
  int64_t head_size = 0, num_heads = 0, num_kv_heads = 0;  // kQKV
  bool bias = false;
};

struct AttentionSpec {
  std::string prefix;  // "model.layers.0.self_attn.attn"
  int64_t num_heads = 0, head_size = 0, num_kv_heads = 0;
};

// One mixture-of-experts layer (FusedMoE) by its engine module path. Its checkpoint tensors are
// "{prefix}.{e}.{gate_proj|down_proj|up_proj}.{weight|weight_scale|weight_scale_inv|input_scale}"
// (make_expert_params_mapping's names); the router is a plain tensor (vLLM builds it with
// quant_config=None, so it stays in the checkpoint's dtype).
struct MoESpec {
  std::string prefix;  // "model.layers.1.mlp.experts"
  int64_t num_experts = 0, top_k = 0, hidden_size = 0, intermediate_size = 0;
  bool renormalize = true;
  bool use_grouped_topk = false;
  std::optional<int64_t> num_expert_group, topk_group;
  std::string scoring_func = "softmax";
  std::string router;                   // "model.layers.1.mlp.gate.weight" (a plain tensor)
  std::string e_score_correction_bias;  // plain tensor given to the layer's routing, or empty
  double routed_scaling_factor = 1.0;   // DeepSeek: applied by the model outside the layer
  // Checkpoint names of w1 (gate), w2 (down), w3 (up): Mixtral's are w1, w2, w3.
  std::string gate_proj = "gate_proj", down_proj = "down_proj", up_proj = "up_proj";
};

// A checkpoint module stacked into a fused engine module: ("qkv_proj", "q_proj", "q").
struct StackedParam {
  std::string param_name;
  std::string weight_name;
  ShardId shard_id;
};

struct ModelDescription {
  std::string architecture;
  DType dtype = DType::kBF16;  // config.json torch_dtype
  std::vector<LinearSpec> linears;
  std::vector<AttentionSpec> attentions;
  std::vector<MoESpec> moes;
  PackedModulesMapping packed_modules_mapping;
  std::vector<StackedParam> stacked_params;
  // Checkpoint tensors kept as plain tensors (embeddings, norms, lm_head): exact names.
  std::vector<std::string> plain_tensors;
  // Checkpoint tensors a loader may skip (rotary caches and the like): suffixes.
  std::vector<std::string> ignored_suffixes = {"rotary_emb.inv_freq", "rotary_emb.cos_cached", "rotary_emb.sin_cached"};
  // Checkpoint tensors a loader skips by prefix (DeepSeek-V3's multi-token-prediction layers,
  // which vLLM loads only into its speculative-decoding model).
  std::vector<std::string> ignored_prefixes;
};

// From config.json: Llama / Mistral / Qwen2 / Qwen3 (dense); Qwen3-MoE (MoE layers unless listed
// in mlp_only_layers, every decoder_sparse_step-th); Mixtral (block_sparse_moe, experts w1/w2/w3);
// DeepSeek-V3 (dense below first_k_dense_replace, then routed experts with sigmoid grouped top-k
// and e_score_correction_bias plus shared_experts as gate_up_proj / down_proj; MLA attention as
// vLLM's linear layers q_a_proj / q_b_proj (or q_proj), kv_a_proj_with_mqa, kv_b_proj, o_proj and
// one MLA attention layer of kv_lora_rank + qk_rope_head_dim per head, one KV head).
// Error(kUnsupported) naming the architecture for others.
ModelDescription describe_hf_model(const nlohmann::ordered_json& config);

struct LoadOptions {
  ParallelConfig parallel;
  int64_t ep_size = 1, ep_rank = 0;  // expert parallelism of the MoE layers
  Device device = Device::cpu();
  std::string kv_cache_dtype = "auto";
  bool calculate_kv_scales = false;
  // The kernel knobs of the post-processing and of the layers it builds (force_weight_only, the
  // q/k/v scale constants); engines and the CLI pass process_overrides().
  Overrides overrides;
  // false: a 16-bit checkpoint loads unquantized (UnquantizedLinearMethod / UnquantizedFusedMoEMethod,
  // no KV-cache method), as vLLM without --quantization; an FP8 checkpoint is then an error. true:
  // get_quant_config's choice (the checkpoint's FP8, or online FP8 of a 16-bit checkpoint).
  bool quantize = true;
  // The model dtype (vLLM's --dtype): parameters, activations and plain tensors (embeddings,
  // norms, routers) in it; default config.json's torch_dtype. The spec's gate refuses f32 with FP8
  // layers unless allow_f32_quantized (tests check the quantization without 16-bit roundings).
  std::optional<DType> dtype;
  bool allow_f32_quantized = false;
};

class LoadedModel {
 public:
  std::unique_ptr<QuantizationConfig> quant_config;  // what get_quant_config chose; null when unquantized
  std::map<std::string, std::unique_ptr<LinearBase>> linears;
  std::map<std::string, std::unique_ptr<Attention>> attentions;
  std::map<std::string, std::unique_ptr<FusedMoE>> moes;
  std::map<std::string, Tensor> plain;  // on the load device

  LinearBase& linear(const std::string& prefix) const;  // Error naming the prefix when absent
  Attention& attention(const std::string& prefix) const;
  FusedMoE& moe(const std::string& prefix) const;
};

// Where a checkpoint tensor goes: the layer (or plain tensor), the parameter and the shard; for
// a MoE layer also the expert.
struct TensorPlacement {
  enum class Target { kLinear, kAttention, kMoE, kPlain, kSkipped };
  Target target = Target::kSkipped;
  std::string module;     // layer prefix, or the plain tensor's name
  std::string parameter;  // "weight", "weight_scale", "k_scale", "w13_weight", "w2_input_scale", ...
  std::optional<ShardId> shard;  // MoE: "w1", "w2" or "w3"
  int64_t expert_id = -1;        // MoE: the global expert id
};

// The placement of checkpoint tensor `name` in a model of `description`; nullopt when no layer
// or plain tensor takes it (an error at load time).
std::optional<TensorPlacement> place_tensor(const ModelDescription& description, const QuantizationConfig& config,
                                            const std::string& name);

LoadedModel load_model(const std::string& checkpoint_dir, const LoadOptions& options = {});
LoadedModel load_model(const std::string& checkpoint_dir, const ModelDescription& description,
                       const LoadOptions& options = {});

}  // namespace fp8kit
