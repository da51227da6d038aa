#include "convert/checkpoint_layout.h"

#include <fnmatch.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "convert/module_names.h"
#include "core/check.h"
#include "core/checked_math.h"
#include "core/names.h"
#include "fp8kit/half.h"
#include "fp8kit/layers/fp8_config.h"
#include "io/json_util.h"
#include "layers/config_json.h"

namespace fp8kit::convert {
namespace {

using json = nlohmann::ordered_json;

std::vector<std::string> string_list(const json& config, const std::vector<std::string>& keys) {
  for (const std::string& key : keys) {
    if (!config.contains(key) || config[key].is_null()) continue;
    std::vector<std::string> out;
    if (config[key].is_array()) {
      for (const json& v : config[key]) {
        if (v.is_string()) out.push_back(v.get<std::string>());
      }
    }
    return out;
  }
  return {};
}

// A block shape: two positive integers, else nullopt (a zero block would divide by zero).
std::optional<std::pair<int64_t, int64_t>> block_pair(const json& v) {
  if (!v.is_array() || v.size() != 2 || !v[0].is_number_integer() || !v[1].is_number_integer()) return std::nullopt;
  if (v[0].is_number_unsigned() || v[1].is_number_unsigned()) {  // nlohmann's type for values above INT64_MAX
    const auto max = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    if ((v[0].is_number_unsigned() && v[0].get<uint64_t>() > max) ||
        (v[1].is_number_unsigned() && v[1].get<uint64_t>() > max)) {
      return std::nullopt;
    }
  }
  const int64_t n = v[0].get<int64_t>(), k = v[1].get<int64_t>();
  if (n <= 0 || k <= 0) return std::nullopt;
  return std::make_pair(n, k);
}

// The value of `key` when it is a string, "" when it is absent or null; a value of another type
// is a config problem naming the key and the type.
std::string string_value(const json& config, const char* key, CheckpointLayout& layout) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  layout.config_problems.push_back(fmt::format("quantization config key '{}' must be a string, got {}", key,
                                               config_json::kind_name(*it)));
  return "";
}

// Every check vLLM's Fp8Config makes of a quantization_config with quant_method "fp8"
// (from_config and the constructor, the spec's texts), as config problems.
void check_fp8_config(const json& qc, CheckpointLayout& layout) {
  try {
    (void)Fp8Config::from_config(qc);
  } catch (const Error& e) {
    layout.config_problems.push_back(e.what());
  }
}

void read_compressed_tensors(const json& qc, CheckpointLayout& layout) {
  layout.format = "compressed-tensors";
  layout.ignored_layers = string_list(qc, {"ignore"});
  if (!qc.contains("config_groups") || !qc["config_groups"].is_object()) return;
  for (const auto& [name, group] : qc["config_groups"].items()) {
    if (!group.is_object()) continue;
    if (group.contains("weights") && group["weights"].is_object() && group["weights"].contains("block_structure")) {
      const json& b = group["weights"]["block_structure"];
      if (const auto block = block_pair(b)) {
        layout.block_size = block;
      } else if (b.is_array() && b.size() == 2 && b[0].is_number_integer() && b[1].is_number_integer()) {
        layout.config_problems.push_back(fmt::format("config_groups.{}.weights.block_structure must hold two positive "
                                                     "integers, got {}",
                                                     name, io::json_excerpt(b)));
      }
    }
    if (group.contains("input_activations") && group["input_activations"].is_object()) {
      const json& a = group["input_activations"];
      layout.activation_scheme = a.contains("dynamic") && a["dynamic"] == false ? "static" : "dynamic";
    }
  }
}

void read_quant_config(const Checkpoint& checkpoint, CheckpointLayout& layout) {
  const json* qc = nullptr;
  json modelopt_file;
  if (checkpoint.has_config()) {
    for (const char* key : {"quantization_config", "compression_config"}) {
      const auto it = checkpoint.config().find(key);
      if (it == checkpoint.config().end() || it->is_null()) continue;  // null: absent, as vLLM's getattr
      layout.config_file = "config.json";
      if (!it->is_object()) {  // get_quant_config refuses it, so the model loader does
        layout.format = "unknown";
        layout.quantization_config = *it;
        layout.config_problems.push_back(
            fmt::format("key '{}' must be a JSON object, got {}", key, config_json::kind_name(*it)));
        layout.problems.push_back(layout.config_file + ": " + layout.config_problems.back());
        return;
      }
      qc = &*it;
      break;
    }
  }
  if (qc == nullptr) {
    modelopt_file = checkpoint.read_json("hf_quant_config.json").value_or(nullptr);
    if (modelopt_file.contains("quantization") && modelopt_file["quantization"].is_object()) {
      modelopt_file = modelopt_file["quantization"];
      modelopt_file["quant_method"] = "modelopt";
      qc = &modelopt_file;
      layout.config_file = "hf_quant_config.json";
    }
  }
  if (qc == nullptr) {
    layout.format = "unquantized";
    layout.quantization_config = nullptr;
    return;
  }
  read_quantization_config(*qc, layout);
}

}  // namespace

void read_quantization_config(const nlohmann::ordered_json& qc_json, CheckpointLayout& layout) {
  const json* qc = &qc_json;
  layout.quantization_config = *qc;
  std::string method;
  if (const auto it = qc->find("quant_method"); it == qc->end()) {
    // get_from_keys in Fp8Config.from_config: the spec's text.
    layout.config_problems.push_back("Cannot find any of ['quant_method'] in the model's quantization config.");
  } else if (!it->is_string()) {
    layout.config_problems.push_back(fmt::format("quantization config key 'quant_method' must be a string, got {}",
                                                 config_json::kind_name(*it)));
  } else {
    method = it->get<std::string>();
  }
  if (method == "fp8") {
    check_fp8_config(*qc, layout);
    const auto block = qc->find("weight_block_size");
    layout.block_size = block != qc->end() ? block_pair(*block) : std::nullopt;
    layout.format = layout.block_size ? "fp8-block" : "fp8";
    const auto scheme = qc->find("activation_scheme");
    layout.activation_scheme = scheme != qc->end() && scheme->is_string() ? scheme->get<std::string>() : "";
    layout.ignored_layers = string_list(*qc, {"ignored_layers", "modules_to_not_convert"});
  } else if (method == "compressed-tensors") {
    read_compressed_tensors(*qc, layout);
  } else if (method == "modelopt") {
    layout.format = "modelopt";
    layout.ignored_layers = string_list(*qc, {"exclude_modules", "ignore"});
    const std::string algo = string_value(*qc, "quant_algo", layout);
    layout.activation_scheme = algo == "FP8" ? "static" : "dynamic";
    if (algo == "FP8_PB_WO") layout.block_size = std::make_pair(int64_t(128), int64_t(128));
  } else if (method == "fbgemm_fp8") {
    layout.format = "fbgemm_fp8";
    layout.activation_scheme = "dynamic";
    layout.ignored_layers = string_list(*qc, {"modules_to_not_convert"});
  } else if (method.empty()) {
    layout.format = "unknown";  // the config problem above says why
  } else {
    layout.format = method;
    layout.problems.push_back("quantization method " + quote_name(method) + " is not an FP8 format fp8kit reads");
  }
  for (const std::string& p : layout.config_problems) layout.problems.push_back(layout.config_file + ": " + p);
  // A pattern the DFA matcher cannot run is fp8kit's limit, not the loader's (vLLM's Fp8Config compares
  // ignored_layers as exact strings): a problem of inspect, which no longer knows what the
  // pattern leaves unquantized, but nothing that dequantize needs.
  for (const std::string& entry : layout.ignored_layers) {
    if (entry.rfind("re:", 0) != 0) continue;
    try {
      layout.ignore_patterns.emplace_back(std::string_view(entry).substr(3), "ignored layer pattern");
    } catch (const Error& e) {
      layout.problems.push_back(layout.config_file + ": " + e.what());
    }
  }
}

std::string scale_scheme(const Shape& weight, const Shape& scale, const CheckpointLayout& layout,
                         std::optional<std::pair<int64_t, int64_t>>& block) {
  const int64_t n = weight[0], k = weight[1];
  Shape s2 = scale;
  if (scale.size() == 4 && scale[1] == 1 && scale[3] == 1) s2 = {scale[0], scale[2]};  // ModelOpt FP8_PB_WO
  // The block shape first: a weight of one block (n <= block_n, k <= block_k) has a [1, 1] scale,
  // which is the block scale vLLM's block loader expects, not a per-tensor one.
  if (s2.size() == 2 && layout.block_size) {
    const auto [bn, bk] = *layout.block_size;
    if (s2 == Shape{ceil_div(n, bn), ceil_div(k, bk)}) {
      block = layout.block_size;
      return "block";
    }
  }
  if (shape_numel(scale) == 1) return "per-tensor";
  if (scale == Shape{n} || scale == Shape{n, 1}) return "per-channel";
  return "";
}

bool CheckpointLayout::is_ignored(const std::string& module) const {
  for (const std::string& entry : ignored_layers) {
    if (entry == module) return true;
    const bool wildcard = format == "modelopt" && entry.rfind("re:", 0) != 0;
    if (wildcard && fnmatch(entry.c_str(), module.c_str(), 0) == 0) return true;
  }
  return std::any_of(ignore_patterns.begin(), ignore_patterns.end(),
                     [&](const io::Regex& p) { return p.matches_at_start(module); });
}

Tensor scale_as_f32(const Checkpoint& checkpoint, const std::string& scale_name) {
  const Tensor s = checkpoint.tensor(scale_name);
  Shape shape = s.shape();
  if (shape.size() == 4 && shape[1] == 1 && shape[3] == 1) shape = {shape[0], shape[2]};
  Tensor out = Tensor::empty(shape, DType::kF32);
  float* o = out.data<float>();
  const int64_t n = s.numel();
  // Copy through memcpy: mapped data may be misaligned for its dtype in a hostile file.
  const auto* bytes = static_cast<const uint8_t*>(s.data_ptr());
  for (int64_t i = 0; i < n; ++i) {
    if (s.dtype() == DType::kF32) {
      std::memcpy(&o[i], bytes + 4 * i, 4);
    } else if (s.dtype() == DType::kBF16 || s.dtype() == DType::kF16) {
      uint16_t b;
      std::memcpy(&b, bytes + 2 * i, 2);
      o[i] = s.dtype() == DType::kBF16 ? bf16_to_float(BFloat16{b}) : f16_to_float(Float16{b});
    } else {
      fail(ErrorCode::kInvalidArgument, "{}: scale tensor {} is {}, expected f32, bf16 or f16",
           shown_path(checkpoint.dir()), quote_name(scale_name), dtype_safetensors_name(s.dtype()));
    }
  }
  return out;
}

CheckpointLayout analyze_checkpoint(const Checkpoint& checkpoint) {
  CheckpointLayout layout;
  read_quant_config(checkpoint, layout);
  const bool serialized = layout.format != "unquantized";

  for (const std::string& name : checkpoint.tensor_names()) {
    const TensorInfo& info = checkpoint.info(name);
    if (is_weight_scale_name(name)) layout.weight_scales.insert(name);
    if (is_input_scale_name(name)) layout.input_scales.insert(name);
    if (is_kv_scale_name(name)) layout.kv_scales.insert(name);
    const std::optional<std::string> module = strip_suffix(name, ".weight");
    if (!module || info.shape.size() != 2) continue;
    if (!is_fp8(info.dtype)) {
      if (serialized && is_floating(info.dtype) && module_kind(*module) == ModuleKind::kLinear &&
          !layout.is_ignored(*module)) {
        layout.problems.push_back(name + " is " + dtype_safetensors_name(info.dtype) +
                                  " but its module is not listed as ignored: a loader will expect FP8 weights");
      }
      continue;
    }
    Fp8Weight w;
    w.module = *module;
    if (info.dtype != DType::kE4M3FN) {
      layout.problems.push_back(name + " is " + dtype_safetensors_name(info.dtype) + "; FP8 checkpoints store F8_E4M3");
    }
    const bool has_inv = checkpoint.contains(*module + ".weight_scale_inv");
    const bool has_plain = checkpoint.contains(*module + ".weight_scale");
    if (has_inv && has_plain) layout.problems.push_back(name + " has both weight_scale and weight_scale_inv");
    if (has_inv || has_plain) {
      w.scale = *module + (has_inv ? ".weight_scale_inv" : ".weight_scale");
      w.scheme = scale_scheme(info.shape, checkpoint.info(w.scale).shape, layout, w.block);
      if (w.scheme.empty()) {
        layout.problems.push_back(w.scale + " has shape " + shape_to_string(checkpoint.info(w.scale).shape) +
                                  ", which fits no scheme for weight " + shape_to_string(info.shape) +
                                  (layout.block_size ? " and block size " + std::to_string(layout.block_size->first) +
                                                           "x" + std::to_string(layout.block_size->second)
                                                     : ""));
      }
    } else {
      layout.problems.push_back(name + " is FP8 but has no weight_scale or weight_scale_inv");
    }
    if (layout.is_ignored(*module)) layout.problems.push_back(name + " is FP8 but its module is listed as ignored");
    if (layout.format == "fp8-block" && w.scheme != "block" && !w.scheme.empty()) {
      layout.problems.push_back(name + " has a " + w.scheme + " scale in a block-quantized checkpoint");
    }
    if (w.block && info.shape[1] % w.block->second != 0) {
      layout.problems.push_back(name + " has " + std::to_string(info.shape[1]) +
                                " input features, not a multiple of block_k " + std::to_string(w.block->second));
    }
    if (const auto group = fused_group_of(*module); group && w.block && info.shape[0] % w.block->first != 0) {
      layout.problems.push_back(name + " has " + std::to_string(info.shape[0]) + " output rows, not a multiple of block_n " +
                                std::to_string(w.block->first) + ", and is a shard of the fused " + group->fused);
    }
    if (layout.activation_scheme == "static" && !checkpoint.contains(*module + ".input_scale")) {
      layout.problems.push_back(name + " has no input_scale but the activation scheme is static");
    }
    layout.fp8_weights.emplace(name, std::move(w));
  }

  // Every scale tensor belongs to a weight; every scale value is finite and positive.
  for (const std::string& s : layout.weight_scales) {
    const std::string weight = s.substr(0, s.rfind(".weight_scale")) + ".weight";
    if (!checkpoint.contains(weight)) layout.problems.push_back(s + " has no weight " + weight);
  }
  for (const std::string& s : layout.input_scales) {
    const std::string weight = s.substr(0, s.size() - std::string(".input_scale").size()) + ".weight";
    if (!checkpoint.contains(weight)) layout.problems.push_back(s + " has no weight " + weight);
    if (layout.activation_scheme == "dynamic") {
      layout.problems.push_back(s + " is present but the activation scheme is dynamic");
    }
  }
  for (const auto* set : {&layout.weight_scales, &layout.input_scales, &layout.kv_scales}) {
    for (const std::string& s : *set) {
      const DType dt = checkpoint.info(s).dtype;
      if (dt != DType::kF32 && dt != DType::kBF16 && dt != DType::kF16) {
        layout.problems.push_back(s + " is " + dtype_safetensors_name(dt) + ", expected F32, BF16 or F16");
        continue;
      }
      const Tensor v = scale_as_f32(checkpoint, s);
      const float* p = v.data<float>();
      int64_t bad = 0;
      for (int64_t i = 0; i < v.numel(); ++i) bad += (std::isfinite(p[i]) && p[i] > 0.0f) ? 0 : 1;
      if (bad) {
        const std::string problem = s + " has " + std::to_string(bad) + " value(s) that are not finite and positive";
        layout.scale_value_problems.emplace(s, problem);
        layout.problems.push_back(problem);
      }
    }
  }
  if (!serialized && !layout.fp8_weights.empty()) {
    layout.problems.push_back("FP8 weights are present but config.json has no quantization_config");
  }
  return layout;
}

}  // namespace fp8kit::convert
