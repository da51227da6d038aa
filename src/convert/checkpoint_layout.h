// How a checkpoint is quantized, read from its config and tensor names: its format (vLLM fp8
// per-tensor or block, compressed-tensors, ModelOpt, FBGEMM, or unquantized), each FP8 weight
// with its scale tensor and scheme, the activation and KV-cache scales, and every problem that
// would make a loader fail or silently corrupt the model. Used by inspect and dequantize.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp8kit/checkpoint.h"
#include "io/regex.h"

namespace fp8kit::convert {

struct Fp8Weight {
  std::string module;
  std::string scale;   // the scale tensor's name; empty when missing
  std::string scheme;  // "per-tensor", "per-channel", "block"; empty when the scale does not fit
  std::optional<std::pair<int64_t, int64_t>> block;  // block scheme: [block_n, block_k]
};

struct CheckpointLayout {
  std::string format;  // "fp8", "fp8-block", "compressed-tensors", "modelopt", "fbgemm_fp8", "unquantized", ...
  nlohmann::ordered_json quantization_config;  // null when none
  std::string config_file;                     // where it was read: "config.json" or "hf_quant_config.json"
  std::string activation_scheme;               // "static", "dynamic" or "" (unknown)
  std::optional<std::pair<int64_t, int64_t>> block_size;  // positive when set
  std::vector<std::string> ignored_layers;
  std::vector<io::Regex> ignore_patterns;  // the "re:" entries of ignored_layers, compiled once
  std::map<std::string, Fp8Weight> fp8_weights;  // by weight tensor name
  std::set<std::string> weight_scales, input_scales, kv_scales;
  // Why a loader would refuse the quantization config itself (for "fp8", every error of
  // Fp8Config::from_config, in the spec's words), without the file name. Also in `problems`.
  std::vector<std::string> config_problems;
  // Scale tensor -> its "not finite and positive" problem. Also in `problems`.
  std::map<std::string, std::string> scale_value_problems;
  std::vector<std::string> problems;

  // Whether `module` is listed as unquantized (exact names, "re:" patterns as Python's re.match,
  // ModelOpt wildcards).
  bool is_ignored(const std::string& module) const;
};

// The config half of analyze_checkpoint: format, activation scheme, block size, ignored layers
// (patterns compiled) and config problems of one quantization_config (layout.config_file names
// its file in the problems). Fuzzed by fuzz/fuzz_quantization_config.cpp.
void read_quantization_config(const nlohmann::ordered_json& quantization_config, CheckpointLayout& layout);

// The scheme of an FP8 weight [n, k] with a scale of shape `scale` ("per-tensor", "per-channel",
// "block" with `block` set, or "" when it fits none) under the layout's block size.
std::string scale_scheme(const Shape& weight, const Shape& scale, const CheckpointLayout& layout,
                         std::optional<std::pair<int64_t, int64_t>>& block);

// Reads the layout; scale values are checked (finite and positive), which reads the scale tensors.
// Nothing in the checkpoint makes it throw other than an unreadable file: every fault is a problem.
CheckpointLayout analyze_checkpoint(const Checkpoint& checkpoint);

// A scale tensor widened to f32 and shaped for ops::dequantize_weight (ModelOpt's 4-D block
// scales become 2-D).
Tensor scale_as_f32(const Checkpoint& checkpoint, const std::string& scale_name);

}  // namespace fp8kit::convert
