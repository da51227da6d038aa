// is_layer_skipped (spec 1.1, vLLM utils/quant_utils.py): exact-membership matching of a module
// path against ignored_layers, shard by shard for fused modules. Exact strings only, by design of
// the spec (hazard H10). Tested in tests/cpu/test_quantization_config.cpp (IsLayerSkipped*).
#include <algorithm>

#include "core/check.h"
#include "fp8kit/layers/quantization_config.h"
#include "layers/py_string.h"

namespace fp8kit {

namespace {

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

bool is_layer_skipped(const std::string& prefix, const std::vector<std::string>& ignored_layers,
                      const PackedModulesMapping& fused_mapping) {
  std::string proj_name(py::last_component(prefix, '.'));
  auto fused = fused_mapping.find(proj_name);
  if (fused == fused_mapping.end()) return contains(ignored_layers, prefix);

  // The reference asserts here; a fused module without shards is a broken model mapping.
  FP8KIT_CHECK_ARG(!fused->second.empty(), "packed_modules_mapping lists no shards for fused module '{}' (layer {})",
                   proj_name, prefix);
  // prefix.replace(proj_name, shard) replaces every occurrence, so a path that repeats the fused
  // name ("qkv_proj.qkv_proj") yields shard paths with the shard name in both places.
  bool first_skipped = false;
  for (size_t i = 0; i < fused->second.size(); ++i) {
    bool skipped = contains(ignored_layers, py::replace_all(prefix, proj_name, fused->second[i]));
    if (i == 0) {
      first_skipped = skipped;
    } else {
      FP8KIT_CHECK_ARG(skipped == first_skipped,
                       "Detected some but not all shards of {} are quantized. All shards of fused layers to have "
                       "the same precision.",
                       prefix);
    }
  }
  return first_skipped;
}

}  // namespace fp8kit
