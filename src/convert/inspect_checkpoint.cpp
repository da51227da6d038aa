// inspect_checkpoint and its text / JSON renderings: the quantization config, one row per
// tensor (role, scheme, scale range), ignored layers, KV-cache scales and problems.
#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "convert/checkpoint_layout.h"
#include "convert/inspect_loading.h"
#include "fp8kit/checkpoint.h"
#include "fp8kit/convert.h"

namespace fp8kit {
namespace {

std::pair<float, float> value_range(const Tensor& t) {
  const float* p = t.data<float>();
  float lo = INFINITY, hi = -INFINITY;
  for (int64_t i = 0; i < t.numel(); ++i) {
    lo = std::min(lo, p[i]);
    hi = std::max(hi, p[i]);
  }
  return {lo, hi};
}

std::string format_range(const InspectedTensor& t) {
  if (!t.scale_min) return "";
  if (*t.scale_min == *t.scale_max) return fmt::format("{:.4g}", *t.scale_min);
  return fmt::format("{:.4g} .. {:.4g}", *t.scale_min, *t.scale_max);
}

}  // namespace

InspectReport inspect_checkpoint(const std::string& dir, bool loading) {
  const Checkpoint checkpoint = Checkpoint::open(dir);
  const convert::CheckpointLayout layout = convert::analyze_checkpoint(checkpoint);
  InspectReport report;
  report.dir = dir;
  report.format = layout.format;
  report.quantization_config = layout.quantization_config;
  report.ignored_layers = layout.ignored_layers;
  report.kv_cache_scales.assign(layout.kv_scales.begin(), layout.kv_scales.end());
  report.problems = layout.problems;
  std::map<std::string, std::pair<float, float>> ranges;
  auto range_of = [&](const std::string& scale) {
    auto it = ranges.find(scale);
    if (it == ranges.end()) {
      const DType dt = checkpoint.info(scale).dtype;
      const bool readable = dt == DType::kF32 || dt == DType::kBF16 || dt == DType::kF16;
      it = ranges.emplace(scale, readable ? value_range(convert::scale_as_f32(checkpoint, scale))
                                          : std::make_pair(NAN, NAN)).first;
    }
    return it->second;
  };
  for (const std::string& name : checkpoint.tensor_names()) {
    const TensorInfo& info = checkpoint.info(name);
    InspectedTensor t;
    t.name = name;
    t.dtype = dtype_safetensors_name(info.dtype);
    t.shape = info.shape;
    report.tensor_bytes += info.data_end - info.data_begin;
    std::string scale;
    if (const auto w = layout.fp8_weights.find(name); w != layout.fp8_weights.end()) {
      t.role = "weight";
      t.scheme = w->second.scheme;
      t.scale_name = w->second.scale;
      scale = w->second.scale;
    } else if (layout.weight_scales.count(name)) {
      t.role = "weight-scale";
      scale = name;
    } else if (layout.input_scales.count(name)) {
      t.role = "input-scale";
      scale = name;
    } else if (layout.kv_scales.count(name)) {
      t.role = "kv-scale";
      scale = name;
    } else {
      t.role = name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0 ? "weight" : "other";
    }
    if (!scale.empty()) {
      const auto [lo, hi] = range_of(scale);
      t.scale_min = lo;
      t.scale_max = hi;
    }
    report.tensors.push_back(std::move(t));
  }
  if (loading) convert::describe_loading(checkpoint, report);
  return report;
}

nlohmann::ordered_json InspectReport::to_json() const {
  nlohmann::ordered_json j;
  j["dir"] = dir;
  j["format"] = format;
  j["quantization_config"] = quantization_config;
  j["ignored_layers"] = ignored_layers;
  j["kv_cache_scales"] = kv_cache_scales;
  j["tensor_bytes"] = tensor_bytes;
  j["tensors"] = nlohmann::ordered_json::array();
  for (const InspectedTensor& t : tensors) {
    nlohmann::ordered_json r = {{"name", t.name}, {"dtype", t.dtype}, {"shape", t.shape}, {"role", t.role}};
    if (!t.scheme.empty()) r["scheme"] = t.scheme;
    if (!t.scale_name.empty()) r["scale"] = t.scale_name;
    if (t.scale_min) {
      r["scale_min"] = std::isfinite(*t.scale_min) ? nlohmann::ordered_json(*t.scale_min) : nullptr;
      r["scale_max"] = std::isfinite(*t.scale_max) ? nlohmann::ordered_json(*t.scale_max) : nullptr;
    }
    j["tensors"].push_back(std::move(r));
  }
  j["problems"] = problems;
  if (!loading.empty() || !loading_note.empty()) {
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (const TensorLoading& l : loading) {
      rows.push_back({{"tensor", l.tensor}, {"target", l.target}, {"module", l.module}, {"parameter", l.parameter},
                      {"shard", l.shard}, {"method", l.method}});
    }
    j["loading"] = rows;
    if (!loading_note.empty()) j["loading_note"] = loading_note;
  }
  return j;
}

std::string InspectReport::to_text() const {
  std::string out = fmt::format("checkpoint   {}\nformat       {}\n", dir, format);
  if (!quantization_config.is_null()) out += fmt::format("quant config {}\n", quantization_config.dump());
  out += fmt::format("tensors      {} ({:.1f} MiB)\n", tensors.size(), tensor_bytes / 1048576.0);
  size_t w_name = 6, w_shape = 5;
  for (const InspectedTensor& t : tensors) {
    w_name = std::max(w_name, t.name.size());
    w_shape = std::max(w_shape, shape_to_string(t.shape).size());
  }
  out += fmt::format("\n{:<{}}  {:<11}  {:<{}}  {:<12}  {:<11}  {}\n", "tensor", w_name, "dtype", "shape", w_shape,
                     "role", "scheme", "scale");
  for (const InspectedTensor& t : tensors) {
    out += fmt::format("{:<{}}  {:<11}  {:<{}}  {:<12}  {:<11}  {}\n", t.name, w_name, t.dtype,
                       shape_to_string(t.shape), w_shape, t.role, t.scheme, format_range(t));
  }
  out += fmt::format("\nignored layers ({}):{}\n", ignored_layers.size(), ignored_layers.empty() ? " none" : "");
  for (const std::string& l : ignored_layers) out += "  " + l + "\n";
  out += fmt::format("KV-cache scales ({}):{}\n", kv_cache_scales.size(), kv_cache_scales.empty() ? " none" : "");
  for (const std::string& s : kv_cache_scales) out += "  " + s + "\n";
  out += fmt::format("problems ({}):{}\n", problems.size(), problems.empty() ? " none" : "");
  for (const std::string& p : problems) out += "  " + p + "\n";
  if (!loading_note.empty()) out += fmt::format("\nloading: {}\n", loading_note);
  if (!loading.empty()) {
    size_t w_tensor = 6, w_module = 6;
    for (const TensorLoading& l : loading) {
      w_tensor = std::max(w_tensor, l.tensor.size());
      w_module = std::max(w_module, l.module.size());
    }
    out += fmt::format("\nloading (as fp8kit's model loader places each tensor)\n{:<{}}  {:<9}  {:<{}}  {:<16}  {:<5}  {}\n",
                       "tensor", w_tensor, "target", "module", w_module, "parameter", "shard", "method");
    for (const TensorLoading& l : loading) {
      out += fmt::format("{:<{}}  {:<9}  {:<{}}  {:<16}  {:<5}  {}\n", l.tensor, w_tensor, l.target, l.module, w_module,
                         l.parameter, l.shard, l.method);
    }
  }
  return out;
}

}  // namespace fp8kit
