#include "convert/module_names.h"

#include <array>
#include <cctype>

namespace fp8kit::convert {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool is_number(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

std::string_view parent_of(std::string_view module) {
  const size_t dot = module.rfind('.');
  return dot == std::string_view::npos ? std::string_view() : module.substr(0, dot);
}

}  // namespace

std::optional<std::string> strip_suffix(std::string_view name, std::string_view suffix) {
  if (!ends_with(name, suffix) || name.size() == suffix.size()) return std::nullopt;
  return std::string(name.substr(0, name.size() - suffix.size()));
}

std::string_view last_component(std::string_view module) {
  const size_t dot = module.rfind('.');
  return dot == std::string_view::npos ? module : module.substr(dot + 1);
}

ModuleKind module_kind(std::string_view module) {
  const std::string_view last = last_component(module);
  if (last == "lm_head") return ModuleKind::kLmHead;
  if (last.find("embed") != std::string_view::npos || last == "wte" || last == "wpe") return ModuleKind::kEmbedding;
  if (last.find("norm") != std::string_view::npos || last.substr(0, 3) == "ln_" || last == "ln") {
    return ModuleKind::kNorm;
  }
  if (last == "gate" || last == "router" || last == "shared_expert_gate") return ModuleKind::kRouter;
  return ModuleKind::kLinear;
}

bool is_expert_module(std::string_view module) {
  // Look for a component "experts" followed by a numeric component.
  size_t pos = 0;
  while ((pos = module.find("experts.", pos)) != std::string_view::npos) {
    const bool starts_component = pos == 0 || module[pos - 1] == '.';
    const size_t begin = pos + 8;
    const size_t end = module.find('.', begin);
    const std::string_view index = module.substr(begin, end == std::string_view::npos ? end : end - begin);
    if (starts_component && is_number(index)) return true;
    pos = begin;
  }
  return false;
}

std::optional<FusedGroup> fused_group_of(std::string_view module) {
  const std::string_view last = last_component(module);
  const std::string parent(parent_of(module));
  if (last == "q_proj" || last == "k_proj" || last == "v_proj") return FusedGroup{parent + "/qkv_proj", "qkv_proj"};
  if (last == "gate_proj" || last == "up_proj") {
    const char* fused = is_expert_module(module) ? "w13" : "gate_up_proj";
    return FusedGroup{parent + "/" + fused, fused};
  }
  if ((last == "w1" || last == "w3") && is_expert_module(module)) return FusedGroup{parent + "/w13", "w13"};
  return std::nullopt;
}

bool is_weight_scale_name(std::string_view name) {
  return ends_with(name, ".weight_scale") || ends_with(name, ".weight_scale_inv");
}

bool is_input_scale_name(std::string_view name) { return ends_with(name, ".input_scale"); }

bool is_kv_scale_name(std::string_view name) {
  static constexpr std::array<std::string_view, 8> kSuffixes = {
      ".k_scale", ".v_scale", ".q_scale", ".kv_scale", ".prob_scale",
      ".k_proj.output_scale", ".v_proj.output_scale", ".q_proj.output_scale"};
  for (std::string_view s : kSuffixes) {
    if (ends_with(name, s)) return true;
  }
  return ends_with(name, "self_attn.prob_output_scale");
}

}  // namespace fp8kit::convert
