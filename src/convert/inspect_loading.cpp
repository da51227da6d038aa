// describe_loading (inspect_loading.h): how the model loader would place each checkpoint tensor
// (layer, parameter, shard; for MoE layers the expert too) and which method each layer gets,
// without loading anything. Tested by tests/cpu/test_model_loader_checkpoints.cpp and
// tests/cpu/test_model_loader_moe.cpp.
#include "convert/inspect_loading.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

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

// 1 + the highest N of the "model.layers.N." tensors (0 when there is none).
int64_t layers_present(const Checkpoint& checkpoint) {
  static const std::string kPrefix = "model.layers.";
  int64_t layers = 0;
  for (const std::string& name : checkpoint.tensor_names()) {
    if (name.compare(0, kPrefix.size(), kPrefix) != 0) continue;
    const size_t dot = name.find('.', kPrefix.size());
    const size_t digits = dot == std::string::npos ? 0 : dot - kPrefix.size();
    if (digits == 0 || digits > 9 || name.find_first_not_of("0123456789", kPrefix.size()) != dot) continue;
    layers = std::max<int64_t>(layers, std::stoll(name.substr(kPrefix.size(), digits)) + 1);
  }
  return layers;
}

}  // namespace

std::optional<std::string> layer_count_problem(const nlohmann::ordered_json& config, int64_t present) {
  const auto it = config.find("num_hidden_layers");
  // A value of the wrong type is describe_hf_model's to report; nlohmann keeps non-negative
  // integers unsigned.
  if (it == config.end() || !it->is_number_unsigned()) return std::nullopt;
  const uint64_t declared = it->get<uint64_t>();
  if (declared <= uint64_t(present)) return std::nullopt;
  return fmt::format("config.json: `num_hidden_layers` is {}, but the checkpoint holds tensors of {} layer(s)",
                     declared, present);
}

void describe_loading(const Checkpoint& checkpoint, InspectReport& report) {
  if (!checkpoint.has_config()) {
    report.loading_note = "no config.json: the architecture is unknown";
    return;
  }
  const std::optional<std::string> problem = layer_count_problem(checkpoint.config(), layers_present(checkpoint));
  if (problem) {
    report.problems.push_back(*problem);
    report.loading_note = *problem;
    return;
  }
  ModelDescription description;
  try {
    description = describe_hf_model(checkpoint.config());
  } catch (const Error& e) {
    // A config value the loader refuses is a problem; an architecture fp8kit does not describe
    // yet (kUnsupported) only a note.
    if (e.code() != ErrorCode::kUnsupported) report.problems.push_back(e.what());
    report.loading_note = e.what();
    return;
  }
  std::unique_ptr<QuantizationConfig> config;
  try {
    config = get_quant_config(checkpoint.config());
    config->packed_modules_mapping = description.packed_modules_mapping;
  } catch (const Error& e) {
    // analyze_checkpoint reports what is wrong with the quantization config already.
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
