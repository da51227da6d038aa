// describe_loading (inspect_loading.h): how the model loader would place each checkpoint tensor
// (layer, parameter, shard; for MoE layers the expert too) and which method each layer gets,
// without loading anything. Tested by tests/cpu/test_model_loader_checkpoints.cpp and
// tests/cpu/test_model_loader_moe.cpp.
#include "convert/inspect_loading.h"

#include "fp8kit/layers/fp8_config.h"
#include "fp8kit/model/model_loader.h"

namespace fp8kit::convert {
namespace {

// The method a linear layer at `prefix` would get: the config's rules without building the layer.
std::string linear_method(const QuantizationConfig& config, const std::string& prefix) {
  if (const auto* fp8 = dynamic_cast<const Fp8Config*>(&config)) {
    return is_layer_skipped(prefix, fp8->ignored_layers, fp8->packed_modules_mapping) ? "UnquantizedLinearMethod"
                                                                                       : "Fp8LinearMethod";
  }
  return config.get_name();
}

// Fp8Config gives every MoE layer Fp8MoEMethod (never skipped, hazard H10).
std::string moe_method(const QuantizationConfig& config) {
  return dynamic_cast<const Fp8Config*>(&config) != nullptr ? "Fp8MoEMethod" : config.get_name();
}

}  // namespace

void describe_loading(const Checkpoint& checkpoint, InspectReport& report) {
  if (!checkpoint.has_config()) {
    report.loading_note = "no config.json: the architecture is unknown";
    return;
  }
  ModelDescription description;
  std::unique_ptr<QuantizationConfig> config;
  try {
    description = describe_hf_model(checkpoint.config());
    config = get_quant_config(checkpoint.config());
    config->packed_modules_mapping = description.packed_modules_mapping;
  } catch (const Error& e) {
    report.loading_note = e.what();
    return;
  }
  for (const std::string& name : checkpoint.tensor_names()) {
    TensorLoading row;
    row.tensor = name;
    const std::optional<TensorPlacement> place = place_tensor(description, *config, name);
    if (!place) {
      row.target = "unplaced";
      report.problems.push_back("the model loader has no place for tensor " + name);
      report.loading.push_back(row);
      continue;
    }
    row.module = place->module;
    row.parameter = place->parameter;
    row.shard = place->target == TensorPlacement::Target::kLinear ? shard_id_string(place->shard) : "";
    switch (place->target) {
      case TensorPlacement::Target::kLinear:
        row.target = "linear";
        row.method = linear_method(*config, place->module);
        break;
      case TensorPlacement::Target::kMoE:
        // The expert goes with the shard: "w1:e3" is shard w1 (gate) of global expert 3.
        row.target = "moe";
        row.shard = shard_id_string(place->shard) + ":e" + std::to_string(place->expert_id);
        row.method = moe_method(*config);
        break;
      case TensorPlacement::Target::kAttention:
        row.target = "attention";
        row.method = dynamic_cast<const Fp8Config*>(config.get()) ? "Fp8KVCacheMethod" : "";
        break;
      case TensorPlacement::Target::kPlain:
        row.target = "plain";
        break;
      case TensorPlacement::Target::kSkipped:
        row.target = "skipped";
        break;
    }
    report.loading.push_back(std::move(row));
  }
}

}  // namespace fp8kit::convert
