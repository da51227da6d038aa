// The plan of `fp8kit quantize`, made from the checkpoint's headers alone before any data is
// read: which weights become FP8 and under which scale names and shapes, which fused groups
// share a scale, which modules are listed as ignored, the output tensors of every shard, and the
// quantization_config to write. Every reason vLLM would refuse the result is found here.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp8kit/checkpoint.h"
#include "fp8kit/convert.h"

namespace fp8kit::convert {

struct PlannedWeight {
  std::string module;       // "model.layers.0.self_attn.q_proj"
  std::string scale_name;   // "<module>.weight_scale" or "<module>.weight_scale_inv"
  Shape scale_shape;
  std::string shared_scale_group;  // per-tensor scheme: the fused group whose amax sets the scale
};

struct QuantizePlan {
  std::map<std::string, PlannedWeight> weights;                  // by weight tensor name
  std::map<std::string, std::vector<std::string>> scale_groups;  // group -> weight tensor names
  std::map<std::string, std::vector<TensorSpec>> shard_outputs;  // shard file -> output tensors
  std::vector<std::string> ignored_layers;
  std::vector<std::string> notes;
  nlohmann::ordered_json quantization_config;
};

QuantizePlan plan_quantization(const Checkpoint& checkpoint, const QuantizeOptions& options);

}  // namespace fp8kit::convert
