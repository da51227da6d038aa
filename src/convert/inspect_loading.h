// inspect --loading: how fp8kit's model loader would place every checkpoint tensor (layer,
// parameter, shard) and which quantization method each layer would get, without loading.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "fp8kit/checkpoint.h"
#include "fp8kit/convert.h"

namespace fp8kit::convert {

void describe_loading(const Checkpoint& checkpoint, InspectReport& report);

// A config.json that declares more decoder layers than the `present` ones the checkpoint holds
// tensors of is one load_model refuses (their norms are missing), and describing 10^9 declared
// layers would exhaust memory: describe_loading checks this first. The problem's text, or nullopt.
std::optional<std::string> layer_count_problem(const nlohmann::ordered_json& config, int64_t present);

}  // namespace fp8kit::convert
