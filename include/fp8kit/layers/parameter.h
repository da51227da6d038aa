// Parameters of fp8kit layers (spec 1.12; vLLM's BasevLLMParameter family): a tensor on the
// layer's device plus how checkpoint tensors load into it. The kinds differ only in their weight
// loading rules, which LinearBase and its subclasses apply (linear.h):
//   kModelWeight     [N, K] weights: output_dim 0 narrowed by column parallelism and shards,
//                    input_dim 1 narrowed by row parallelism
//   kBlockScale      [ceil(N/bn), ceil(K/bk)] block scales: like kModelWeight, offsets in blocks
//   kChannelScale    [N, 1] per-channel scales: column rules only
//   kPerTensorScale  [S] one scale per logical shard (q/k/v -> 0/1/2, gate/up -> 0/1); a 0-dim or
//                    [1] checkpoint value goes into its shard's slot
//   kBias            [N] bias: column rules (narrowed per rank); row-parallel layers keep it whole
//   kPlain           loaded as is (same shape, or a one-element value into a one-element tensor)
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <variant>

#include "fp8kit/tensor.h"

namespace fp8kit {

enum class ParameterKind : uint8_t { kModelWeight, kBlockScale, kChannelScale, kPerTensorScale, kBias, kPlain };
const char* parameter_kind_name(ParameterKind kind);

// Which logical shard of a fused layer a checkpoint tensor is: "q", "k", "v" for QKV layers,
// 0, 1, ... for merged column layers; nullopt for a tensor stored fused on disk (or unfused layer).
using ShardId = std::variant<int64_t, std::string>;
std::string shard_id_string(const std::optional<ShardId>& shard);  // "q", "1", "all"

struct Parameter {
  std::string name;  // "weight", "weight_scale", "weight_scale_inv", "input_scale", "bias", ...
  ParameterKind kind = ParameterKind::kPlain;
  Tensor data;
  int64_t output_dim = -1;  // kModelWeight, kBlockScale, kChannelScale, kBias: 0
  int64_t input_dim = -1;   // kModelWeight, kBlockScale: 1
  std::set<std::string> loaded_shards;  // shard_id_string of every tensor loaded into it
};

}  // namespace fp8kit
