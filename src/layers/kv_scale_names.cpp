// remap_kv_scale_name (spec 1.13 maybe_remap_kv_scale_name; FORMATS.md 1f): checkpoint names of
// KV-cache (and q / prob) scales -> the attention parameter they load into, matched on the
// name's last components. Tested in tests/cpu/test_kv_scale_names.cpp.
#include <string_view>
#include <vector>

#include "fp8kit/layers/attention.h"
#include "fp8kit/log.h"

namespace fp8kit {
namespace {

std::vector<std::string_view> split_components(std::string_view name) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (size_t dot = name.find('.'); dot != std::string_view::npos; dot = name.find('.', start)) {
    parts.push_back(name.substr(start, dot - start));
    start = dot + 1;
  }
  parts.push_back(name.substr(start));
  return parts;
}

// The name without its last `count` components (and the dot before them).
std::string drop_last(std::string_view name, const std::vector<std::string_view>& parts, size_t count) {
  size_t length = name.size();
  for (size_t i = 0; i < count; ++i) length -= parts[parts.size() - 1 - i].size() + 1;
  return std::string(name.substr(0, length));
}

}  // namespace

std::optional<std::string> remap_kv_scale_name(const std::string& name) {
  const std::vector<std::string_view> parts = split_components(name);
  if (parts.size() < 2) return std::nullopt;  // the reference matches ".k_scale", dot included
  const std::string_view leaf = parts.back();

  if (leaf == "kv_scale") {
    log_warning(
        "DEPRECATED. Found kv_scale in the checkpoint. This format is deprecated in favor of separate k_scale and "
        "v_scale tensors and will be removed in a future release. Functionally, we will remap kv_scale to k_scale "
        "and duplicate k_scale to v_scale");
    // The single scale goes to k_scale; the KV-cache method copies it to v_scale (case c).
    return drop_last(name, parts, 1) + ".attn.k_scale";
  }

  for (std::string_view kind : {"k", "v", "q", "prob"}) {
    if (leaf != std::string(kind) + "_scale") continue;
    const std::string_view parent = parts[parts.size() - 2];
    const bool under_self_attn = parts.size() >= 3 && parts[parts.size() - 3] == "self_attn";
    // Engine naming already: inserting ".attn" again would name no parameter.
    if (parent == "attn" && under_self_attn) return name;
    // ModelOpt puts k/v (and q) scales on their projection; fused-QKV exports on qkv_proj.
    if (under_self_attn && kind != "prob" && (parent == std::string(kind) + "_proj" || parent == "qkv_proj")) {
      return drop_last(name, parts, 2) + ".attn." + std::string(leaf);
    }
    return drop_last(name, parts, 1) + ".attn." + std::string(leaf);
  }
  return std::nullopt;
}

}  // namespace fp8kit
