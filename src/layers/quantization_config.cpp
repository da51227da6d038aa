// QuantizationConfig helpers (spec 1.1, 4): get_from_keys(_or) over a quantization_config dict,
// the config-time capability/dtype gate of vLLM's config.py, and get_quant_config, which picks
// the config of a checkpoint from its HF config.json. Tested in tests/cpu/test_quantization_config.cpp.
#include "fp8kit/layers/quantization_config.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "fp8kit/layers/fp8_config.h"
#include "layers/config_json.h"
#include "layers/py_string.h"
#include "layers/torch_dtype.h"

namespace fp8kit {

using nlohmann::ordered_json;

const ordered_json& QuantizationConfig::get_from_keys(const ordered_json& config,
                                                     const std::vector<std::string>& keys) {
  // Python would test `key in config` on any container; a quantization config that is not a
  // dict is malformed input, so say so rather than guess.
  FP8KIT_CHECK_ARG(config.is_object(), "the model's quantization config must be a JSON object, got {}",
                   config_json::kind_name(config));
  for (const std::string& key : keys) {
    auto it = config.find(key);
    if (it != config.end()) return *it;  // a present null is returned, as Python returns None
  }
  fail(ErrorCode::kInvalidArgument, "Cannot find any of {} in the model's quantization config.", py::list_repr(keys));
}

ordered_json QuantizationConfig::get_from_keys_or(const ordered_json& config, const std::vector<std::string>& keys,
                                                  const ordered_json& fallback) {
  FP8KIT_CHECK_ARG(config.is_object(), "the model's quantization config must be a JSON object, got {}",
                   config_json::kind_name(config));
  for (const std::string& key : keys) {
    auto it = config.find(key);
    if (it != config.end()) return *it;
  }
  return fallback;
}

void verify_quantization_support(const QuantizationConfig& config, int device_capability, DType model_dtype) {
  FP8KIT_CHECK_ARG(device_capability >= config.get_min_capability(),
                   "The quantization method {} is not supported for the current GPU. Minimum capability: {}. "
                   "Current capability: {}.",
                   config.get_name(), config.get_min_capability(), device_capability);
  std::vector<DType> supported = config.get_supported_act_dtypes();
  FP8KIT_CHECK_ARG(std::find(supported.begin(), supported.end(), model_dtype) != supported.end(),
                   "{} is not supported for quantization method {}. Supported dtypes: {}",
                   torch_dtype_name(model_dtype), config.get_name(), torch_dtype_list(supported));
}

std::unique_ptr<QuantizationConfig> get_quant_config(const ordered_json& hf_config) {
  FP8KIT_CHECK_ARG(hf_config.is_object(), "the model's config.json must be a JSON object, got {}",
                   config_json::kind_name(hf_config));
  // vLLM reads the attribute with getattr(..., None): a null value is as good as absent.
  std::string key;
  const ordered_json* quant =
      config_json::find_non_null(hf_config, {"quantization_config", "compression_config"}, &key);
  if (quant == nullptr) return std::make_unique<Fp8Config>();  // online FP8 of a BF16/FP16 checkpoint
  FP8KIT_CHECK_ARG(quant->is_object(), "config.json key '{}' must be a JSON object, got {}", key,
                   config_json::kind_name(*quant));
  // Without quant_method, from_config raises the spec's "Cannot find any of ['quant_method']".
  auto method = quant->find("quant_method");
  if (method != quant->end()) {
    std::string name = config_json::as_string(*method, "quant_method");
    FP8KIT_CHECK(name == "fp8", ErrorCode::kUnsupported, "quantization method '{}' is not supported yet", name);
  }
  return Fp8Config::from_config(*quant);
}

}  // namespace fp8kit
