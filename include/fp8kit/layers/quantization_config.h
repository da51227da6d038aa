// QuantizationConfig (spec 1.1, 4): the base of every quantization config, the helpers that read
// a checkpoint's quantization_config dict, layer skipping, the HF-to-engine name mapper, the
// config-time capability/dtype gate, and get_quant_config (online FP8 for BF16 checkpoints).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>  // not json.hpp: it costs each file that includes it ~1.7 s to compile

#include "fp8kit/dtype.h"
#include "fp8kit/layers/layer.h"
#include "fp8kit/layers/quantize_method.h"

namespace fp8kit {

// Fused module name -> the checkpoint modules stacked into it, e.g.
// {"qkv_proj": {"q_proj", "k_proj", "v_proj"}, "gate_up_proj": {"gate_proj", "up_proj"}}.
using PackedModulesMapping = std::map<std::string, std::vector<std::string>>;

class QuantizationConfig {
 public:
  virtual ~QuantizationConfig() = default;

  virtual std::string get_name() const = 0;
  virtual std::vector<DType> get_supported_act_dtypes() const = 0;
  virtual int get_min_capability() const = 0;
  virtual std::vector<std::string> get_config_filenames() const = 0;
  // The method for `layer` at module path `prefix`, or nullptr when the config does not apply.
  virtual std::unique_ptr<QuantizeMethod> get_quant_method(const Layer& layer, const std::string& prefix) const = 0;
  // Engine parameter name for a checkpoint KV-cache scale name, or nullopt.
  virtual std::optional<std::string> get_cache_scale(const std::string& name) const { return std::nullopt; }

  // The value of the first of `keys` present in `config`; otherwise Error(kInvalidArgument)
  // "Cannot find any of ['k1', 'k2'] in the model's quantization config."
  static const nlohmann::ordered_json& get_from_keys(const nlohmann::ordered_json& config,
                                                     const std::vector<std::string>& keys);
  // The value of the first of `keys` present, or `fallback`.
  static nlohmann::ordered_json get_from_keys_or(const nlohmann::ordered_json& config,
                                                 const std::vector<std::string>& keys,
                                                 const nlohmann::ordered_json& fallback);

  // Assigned from the model class (configure_quant_config); empty by default.
  PackedModulesMapping packed_modules_mapping;
};

// is_layer_skipped (spec 1.1): proj_name = last component of prefix. If proj_name is a fused
// module in fused_mapping, each shard prefix (prefix with every occurrence of proj_name replaced
// by the shard name) is looked up by exact string membership in ignored_layers; shards that
// disagree raise Error(kInvalidArgument) "Detected some but not all shards of {prefix} are
// quantized. All shards of fused layers to have the same precision.". Otherwise: prefix in
// ignored_layers.
bool is_layer_skipped(const std::string& prefix, const std::vector<std::string>& ignored_layers,
                      const PackedModulesMapping& fused_mapping = {});

// WeightsMapper: renames checkpoint (HF) names to engine names. Within each of substr, prefix and
// suffix, the longest matching key wins and is replaced once; a mapping to nullopt drops the name.
struct WeightsMapper {
  std::vector<std::pair<std::string, std::optional<std::string>>> orig_to_new_substr;
  std::vector<std::pair<std::string, std::optional<std::string>>> orig_to_new_prefix;
  std::vector<std::pair<std::string, std::optional<std::string>>> orig_to_new_suffix;

  std::optional<std::string> map_name(const std::string& name) const;
  std::vector<std::string> apply_list(const std::vector<std::string>& names) const;
};

// The config-time gate (vLLM config.py): Error(kInvalidArgument)
//   "The quantization method {name} is not supported for the current GPU. Minimum capability: {min}. Current capability: {cap}."
//   "{dtype} is not supported for quantization method {name}. Supported dtypes: [...]"
// capability is major*10+minor (90 for sm_90).
void verify_quantization_support(const QuantizationConfig& config, int device_capability, DType model_dtype);

// get_quant_config: the checkpoint's HF config.json (the whole dict). With a
// "quantization_config" (or "compression_config") whose quant_method names fp8, returns
// Fp8Config::from_config of it. Without one, returns Fp8Config() (online quantization of a
// BF16/FP16 checkpoint). Other quant methods give Error(kUnsupported) naming the method.
std::unique_ptr<QuantizationConfig> get_quant_config(const nlohmann::ordered_json& hf_config);

}  // namespace fp8kit
