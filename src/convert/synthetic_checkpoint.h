// A deterministic synthetic Hugging Face checkpoint with the names and config.json keys of a real
// architecture: Qwen3-MoE (dense layers via mlp_only_layers; no MoE layers: dense Qwen3), Mixtral
// (block_sparse_moe, experts w1/w2/w3) or DeepSeek-V3 (MLA attention, dense layers below
// first_k_dense_replace, routed experts with a sigmoid router and its f32 correction bias, shared
// experts). Weights come from a seeded generator with a few outliers, as trained weights have.
// Behind `fp8kit demo`, the checkpoint and loader tests and the quantize benchmark; no network,
// same bytes on every machine.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fp8kit/dtype.h"

namespace fp8kit::convert {

enum class SyntheticArchitecture { kQwen3Moe, kMixtral, kDeepseekV3 };

struct SyntheticModelSpec {
  SyntheticArchitecture architecture = SyntheticArchitecture::kQwen3Moe;
  int64_t vocab_size = 1024;
  int64_t hidden_size = 256;
  int64_t intermediate_size = 768;  // dense layers (Mixtral has none)
  int64_t num_layers = 2;
  int64_t num_heads = 4;
  int64_t num_kv_heads = 2;  // Qwen3, Mixtral (DeepSeek's MLA has num_heads)
  int64_t head_dim = 64;     // Qwen3, Mixtral (Mixtral's config derives it: must be hidden / heads)
  // Qwen3-MoE only: the sparse layers, the others are dense; none: a dense Qwen3ForCausalLM.
  // Mixtral: every layer is sparse. DeepSeek-V3: layers from first_k_dense_replace on.
  std::vector<int64_t> moe_layers = {1};
  int64_t num_experts = 8;              // DeepSeek: n_routed_experts; Mixtral: num_local_experts
  int64_t top_k = 2;                    // num_experts_per_tok
  int64_t moe_intermediate_size = 256;  // per expert (Mixtral writes it as intermediate_size)
  // DeepSeek-V3 only (config_671B.json values in comments).
  int64_t first_k_dense_replace = 1;    // 3
  int64_t n_shared_experts = 1;         // 1
  int64_t n_group = 4, topk_group = 2;  // 8, 4
  double routed_scaling_factor = 2.5;   // 2.5
  int64_t q_lora_rank = 128;            // 1536
  int64_t kv_lora_rank = 128;           // 512
  int64_t qk_nope_head_dim = 32;        // 128
  int64_t qk_rope_head_dim = 16;        // 64
  int64_t v_head_dim = 32;              // 128
  bool tie_word_embeddings = false;
  DType dtype = DType::kBF16;
  uint64_t seed = 0;
  uint64_t max_shard_bytes = 0;  // 0: one model.safetensors; otherwise shards + index
};

// Writes config.json, generation_config.json and the weights into `dir` (created if needed).
void write_synthetic_checkpoint(const std::string& dir, const SyntheticModelSpec& spec);

// Bytes of weights the spec produces.
uint64_t synthetic_checkpoint_bytes(const SyntheticModelSpec& spec);

}  // namespace fp8kit::convert
