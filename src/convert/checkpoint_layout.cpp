#include "convert/checkpoint_layout.h"

#include <fnmatch.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <regex>

#include "convert/module_names.h"
#include "core/check.h"
#include "fp8kit/half.h"

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

std::optional<std::pair<int64_t, int64_t>> block_pair(const json& v) {
  if (!v.is_array() || v.size() != 2 || !v[0].is_number_integer() || !v[1].is_number_integer()) return std::nullopt;
  return std::make_pair(v[0].get<int64_t>(), v[1].get<int64_t>());
}

void read_quant_config(const Checkpoint& checkpoint, CheckpointLayout& layout) {
  const json* qc = nullptr;
  json modelopt_file;
  if (checkpoint.has_config()) {
    for (const char* key : {"quantization_config", "compression_config"}) {
      if (checkpoint.config().contains(key) && checkpoint.config()[key].is_object()) {
        qc = &checkpoint.config()[key];
        break;
      }
    }
  }
  if (qc == nullptr) {
    modelopt_file = checkpoint.read_json("hf_quant_config.json").value_or(nullptr);
    if (modelopt_file.contains("quantization") && modelopt_file["quantization"].is_object()) {
      modelopt_file = modelopt_file["quantization"];
      modelopt_file["quant_method"] = "modelopt";
      qc = &modelopt_file;
    }
  }
  if (qc == nullptr) {
    layout.format = "unquantized";
    layout.quantization_config = nullptr;
    return;
  }
  layout.quantization_config = *qc;
  const std::string method = qc->value("quant_method", std::string());
  if (method == "fp8") {
    layout.block_size = qc->contains("weight_block_size") ? block_pair((*qc)["weight_block_size"]) : std::nullopt;
    layout.format = layout.block_size ? "fp8-block" : "fp8";
    layout.activation_scheme = qc->value("activation_scheme", std::string());
    layout.ignored_layers = string_list(*qc, {"ignored_layers", "modules_to_not_convert"});
  } else if (method == "compressed-tensors") {
    layout.format = "compressed-tensors";
    layout.ignored_layers = string_list(*qc, {"ignore"});
    if (qc->contains("config_groups") && (*qc)["config_groups"].is_object()) {
      for (const auto& [name, group] : (*qc)["config_groups"].items()) {
        if (group.contains("weights") && group["weights"].is_object() && group["weights"].contains("block_structure")) {
          if (auto b = block_pair(group["weights"]["block_structure"])) layout.block_size = b;
        }
        if (group.contains("input_activations") && group["input_activations"].is_object()) {
          const json& a = group["input_activations"];
          layout.activation_scheme = a.contains("dynamic") && a["dynamic"] == false ? "static" : "dynamic";
        }
      }
    }
  } else if (method == "modelopt") {
    layout.format = "modelopt";
    layout.ignored_layers = string_list(*qc, {"exclude_modules", "ignore"});
    const std::string algo = qc->value("quant_algo", std::string());
    layout.activation_scheme = algo == "FP8" ? "static" : "dynamic";
    if (algo == "FP8_PB_WO") layout.block_size = std::make_pair(int64_t(128), int64_t(128));
  } else if (method == "fbgemm_fp8") {
    layout.format = "fbgemm_fp8";
    layout.activation_scheme = "dynamic";
    layout.ignored_layers = string_list(*qc, {"modules_to_not_convert"});
  } else {
    layout.format = method.empty() ? "unknown" : method;
    layout.problems.push_back("quantization method '" + layout.format + "' is not an FP8 format fp8kit reads");
  }
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Scheme of an FP8 weight [n, k] from the shape of its scale.
std::string scheme_of(const Shape& weight, const Shape& scale, const CheckpointLayout& layout,
                      std::optional<std::pair<int64_t, int64_t>>& block) {
  const int64_t numel = shape_numel(scale);
  const int64_t n = weight[0], k = weight[1];
  if (numel == 1) return "per-tensor";
  if (scale == Shape{n} || scale == Shape{n, 1}) return "per-channel";
  Shape s2 = scale;
  if (scale.size() == 4 && scale[1] == 1 && scale[3] == 1) s2 = {scale[0], scale[2]};  // ModelOpt FP8_PB_WO
  if (s2.size() == 2 && layout.block_size) {
    const auto [bn, bk] = *layout.block_size;
    if (s2 == Shape{ceil_div(n, bn), ceil_div(k, bk)}) {
      block = layout.block_size;
      return "block";
    }
  }
  return "";
}

}  // namespace

bool CheckpointLayout::is_ignored(const std::string& module) const {
  for (const std::string& entry : ignored_layers) {
    if (entry == module) return true;
    if (entry.rfind("re:", 0) == 0) {
      try {
        if (std::regex_match(module, std::regex(entry.substr(3)))) return true;
      } catch (const std::regex_error&) {
      }
    } else if (format == "modelopt" && fnmatch(entry.c_str(), module.c_str(), 0) == 0) {
      return true;
    }
  }
  return false;
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
      fail(ErrorCode::kInvalidArgument, "{}: scale tensor '{}' is {}, expected f32, bf16 or f16", checkpoint.dir(),
           scale_name, dtype_safetensors_name(s.dtype()));
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
      w.scheme = scheme_of(info.shape, checkpoint.info(w.scale).shape, layout, w.block);
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
      if (bad) layout.problems.push_back(s + " has " + std::to_string(bad) + " value(s) that are not finite and positive");
    }
  }
  if (!serialized && !layout.fp8_weights.empty()) {
    layout.problems.push_back("FP8 weights are present but config.json has no quantization_config");
  }
  return layout;
}

}  // namespace fp8kit::convert
