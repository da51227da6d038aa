// Fp8Config (spec 1.1): constructor validation with the spec's error texts, from_config over a
// checkpoint's quantization_config, get_quant_method dispatch, KV-scale names, the HF-to-engine
// rename of ignored_layers. Tested in tests/cpu/test_fp8_config.cpp.
#include "fp8kit/layers/fp8_config.h"

#include <algorithm>

#include <fmt/ranges.h>

#include "core/check.h"
#include "fp8kit/layers/attention.h"
#include "fp8kit/layers/fp8_linear_method.h"
#include "fp8kit/layers/fp8_moe_method.h"
#include "fp8kit/layers/fused_moe.h"
#include "fp8kit/layers/linear.h"
#include "fp8kit/layers/unquantized_linear_method.h"
#include "layers/config_json.h"
#include "layers/py_string.h"

namespace fp8kit {

using nlohmann::ordered_json;

Fp8Config::Fp8Config(bool is_checkpoint_fp8_serialized, std::string activation_scheme,
                     std::vector<std::string> ignored_layers, std::optional<std::vector<int64_t>> weight_block_size)
    : is_checkpoint_fp8_serialized(is_checkpoint_fp8_serialized),
      activation_scheme(std::move(activation_scheme)),
      ignored_layers(std::move(ignored_layers)),
      weight_block_size(std::move(weight_block_size)) {
  const auto& schemes = fp8_activation_schemes();
  FP8KIT_CHECK_ARG(std::find(schemes.begin(), schemes.end(), this->activation_scheme) != schemes.end(),
                   "Unsupported activation scheme {}", this->activation_scheme);
  if (!this->weight_block_size) return;
  // The spec's order of checks, so a config with several faults reports the same one.
  const std::vector<int64_t>& block = *this->weight_block_size;
  FP8KIT_CHECK_ARG(this->is_checkpoint_fp8_serialized,
                   "The block-wise quantization only supports fp8-serialized checkpoint for now.");
  FP8KIT_CHECK_ARG(block.size() == 2,
                   "The quantization block size of weight must have 2 dimensions, but got {} dimensions",
                   block.size());
  FP8KIT_CHECK_ARG(this->activation_scheme == "dynamic",
                   "The block-wise quantization only supports dynamic activation scheme for now, but got {} "
                   "activation scheme.",
                   this->activation_scheme);
  // Not in the reference, which would divide by a zero block later on.
  FP8KIT_CHECK_ARG(block[0] > 0 && block[1] > 0, "weight_block_size must hold positive integers, but got [{}]",
                   fmt::join(block, ", "));
}

std::unique_ptr<Fp8Config> Fp8Config::from_config(const ordered_json& config) {
  std::string quant_method = config_json::as_string(get_from_keys(config, {"quant_method"}), "quant_method");
  bool serialized = quant_method.find("fp8") != std::string::npos;  // the spec's substring test
  std::string scheme = config_json::as_string(get_from_keys(config, {"activation_scheme"}), "activation_scheme");

  // Qwen3 FP8 checkpoints name the list modules_to_not_convert; the reference snapshot reads only
  // ignored_layers and would quantize those modules. ignored_layers wins when both are given.
  std::vector<std::string> ignored;
  std::string ignored_key;
  if (const ordered_json* value =
          config_json::find_non_null(config, {"ignored_layers", "modules_to_not_convert"}, &ignored_key)) {
    ignored = config_json::as_string_list(*value, ignored_key);
  }

  std::optional<std::vector<int64_t>> block;
  if (const ordered_json* value = config_json::find_non_null(config, {"weight_block_size"})) {
    block = config_json::as_int_list(*value, "weight_block_size");
  }
  return std::make_unique<Fp8Config>(serialized, std::move(scheme), std::move(ignored), std::move(block));
}

std::unique_ptr<QuantizeMethod> Fp8Config::get_quant_method(const Layer& layer, const std::string& prefix) const {
  if (dynamic_cast<const LinearBase*>(&layer) != nullptr) {
    if (is_layer_skipped(prefix, ignored_layers, packed_modules_mapping)) {
      return std::make_unique<UnquantizedLinearMethod>();
    }
    return std::make_unique<Fp8LinearMethod>(std::make_shared<const Fp8Config>(*this));
  }
  // Hazard H10, kept on purpose: the spec never consults ignored_layers for FusedMoE, so an
  // ignored MoE layer is still quantized. Matching vLLM keeps checkpoints loading the same way;
  // MoE router gates are ReplicatedLinear (a LinearBase): quantized unless listed exactly.
  // Each method owns a copy of the config, so none dangles when the caller's config goes away.
  if (dynamic_cast<const FusedMoE*>(&layer) != nullptr) {
    return std::make_unique<Fp8MoEMethod>(std::make_shared<const Fp8Config>(*this));
  }
  if (dynamic_cast<const Attention*>(&layer) != nullptr) {
    return std::make_unique<Fp8KVCacheMethod>(std::make_shared<const Fp8Config>(*this));
  }
  return nullptr;
}

std::optional<std::string> Fp8Config::get_cache_scale(const std::string& name) const {
  // compressed-tensors names; str.replace semantics (every occurrence). A name that ends with
  // ".output_scale" and holds ".k_proj" elsewhere comes back unchanged, as in the reference.
  if (name.ends_with(".output_scale")) {
    auto holds = [&](const char* part) { return name.find(part) != std::string::npos; };
    if (holds(".k_proj")) return py::replace_all(name, ".k_proj.output_scale", ".attn.k_scale");
    if (holds(".v_proj")) return py::replace_all(name, ".v_proj.output_scale", ".attn.v_scale");
    if (holds(".q_proj")) return py::replace_all(name, ".q_proj.output_scale", ".attn.q_scale");
  }
  if (name.ends_with("self_attn.prob_output_scale")) {
    return py::replace_all(name, ".prob_output_scale", ".attn.prob_scale");
  }
  return std::nullopt;
}

void Fp8Config::apply_vllm_mapper(const WeightsMapper& mapper) { ignored_layers = mapper.apply_list(ignored_layers); }

}  // namespace fp8kit
