// A deterministic synthetic Hugging Face checkpoint: Qwen3-MoE names and config.json (dense
// layers via mlp_only_layers, MoE layers with a router and per-expert projections), weights drawn
// from a seeded generator with a few outliers, as trained weights have. Behind `fp8kit demo`, the
// checkpoint tests and the quantize benchmark; no network, same bytes on every machine.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fp8kit/dtype.h"

namespace fp8kit::convert {

struct SyntheticModelSpec {
  int64_t vocab_size = 1024;
  int64_t hidden_size = 256;
  int64_t intermediate_size = 768;  // dense layers
  int64_t num_layers = 2;
  int64_t num_heads = 4;
  int64_t num_kv_heads = 2;
  int64_t head_dim = 64;
  std::vector<int64_t> moe_layers = {1};  // the others are dense; none: a dense Qwen3ForCausalLM
  int64_t num_experts = 8;
  int64_t top_k = 2;
  int64_t moe_intermediate_size = 256;
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
