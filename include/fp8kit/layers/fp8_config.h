// Fp8Config (spec 1.1): the "fp8" quantization config of vLLM, with the spec's validation and
// error texts, from_config, get_quant_method dispatch, ignored layers and KV-cache scale names.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fp8kit/layers/quantization_config.h"

namespace fp8kit {

inline const std::vector<std::string>& fp8_activation_schemes() {
  static const std::vector<std::string> schemes = {"static", "dynamic"};
  return schemes;
}

class Fp8Config : public QuantizationConfig {
 public:
  // Errors (kInvalidArgument, spec texts):
  //   "Unsupported activation scheme {s}"
  //   "The block-wise quantization only supports fp8-serialized checkpoint for now."
  //   "The quantization block size of weight must have 2 dimensions, but got {n} dimensions"
  //   "The block-wise quantization only supports dynamic activation scheme for now, but got {s} activation scheme."
  explicit Fp8Config(bool is_checkpoint_fp8_serialized = false, std::string activation_scheme = "dynamic",
                     std::vector<std::string> ignored_layers = {},
                     std::optional<std::vector<int64_t>> weight_block_size = std::nullopt);

  // quant_method (required; serialized when it contains "fp8"), activation_scheme (required),
  // ignored_layers (optional; falls back to modules_to_not_convert, as Qwen3 checkpoints write),
  // weight_block_size (optional).
  static std::unique_ptr<Fp8Config> from_config(const nlohmann::ordered_json& config);

  std::string get_name() const override { return "fp8"; }
  std::vector<DType> get_supported_act_dtypes() const override { return {DType::kBF16, DType::kF16}; }
  int get_min_capability() const override { return 80; }
  std::vector<std::string> get_config_filenames() const override { return {}; }
  // LinearBase -> UnquantizedLinearMethod if skipped else Fp8LinearMethod; FusedMoE ->
  // Fp8MoEMethod (never skipped); Attention -> Fp8KVCacheMethod; anything else -> nullptr.
  std::unique_ptr<QuantizeMethod> get_quant_method(const Layer& layer, const std::string& prefix) const override;
  // "*.k_proj.output_scale" -> "*.attn.k_scale", v_proj -> v_scale, q_proj -> q_scale,
  // "*self_attn.prob_output_scale" -> "*self_attn.attn.prob_scale".
  std::optional<std::string> get_cache_scale(const std::string& name) const override;
  // Renames ignored_layers from checkpoint names to engine names.
  void apply_vllm_mapper(const WeightsMapper& mapper);

  bool is_checkpoint_fp8_serialized = false;
  std::string activation_scheme;
  std::vector<std::string> ignored_layers;
  std::optional<std::vector<int64_t>> weight_block_size;
};

}  // namespace fp8kit
