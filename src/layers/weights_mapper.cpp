// WeightsMapper (spec 1.1 apply_vllm_mapper): renames checkpoint names to engine names by
// substring, then prefix, then suffix rules. Tested in tests/cpu/test_quantization_config.cpp
// (WeightsMapper*).
#include <optional>
#include <string>

#include "fp8kit/layers/quantization_config.h"

namespace fp8kit {

namespace {

using Rules = std::vector<std::pair<std::string, std::optional<std::string>>>;

// The longest key that `matches` the name; among keys of one length, the first listed. Longest
// first makes overlapping rules ("mlp." and "mlp.experts.") independent of their order.
template <typename Match>
const Rules::value_type* longest_match(const Rules& rules, const std::string& name, Match matches) {
  const Rules::value_type* best = nullptr;
  for (const auto& rule : rules) {
    if (matches(name, rule.first) && (best == nullptr || rule.first.size() > best->first.size())) best = &rule;
  }
  return best;
}

}  // namespace

std::optional<std::string> WeightsMapper::map_name(const std::string& name) const {
  std::string key = name;

  if (const auto* rule = longest_match(orig_to_new_substr, key, [](const std::string& k, const std::string& sub) {
        return k.find(sub) != std::string::npos;
      })) {
    if (!rule->second) return std::nullopt;
    key.replace(key.find(rule->first), rule->first.size(), *rule->second);  // first occurrence only
  }

  if (const auto* rule = longest_match(orig_to_new_prefix, key, [](const std::string& k, const std::string& pre) {
        return k.starts_with(pre);
      })) {
    if (!rule->second) return std::nullopt;
    key.replace(0, rule->first.size(), *rule->second);
  }

  if (const auto* rule = longest_match(orig_to_new_suffix, key, [](const std::string& k, const std::string& suf) {
        return k.ends_with(suf);
      })) {
    if (!rule->second) return std::nullopt;
    // The last occurrence of a suffix the name ends with is that suffix.
    key.replace(key.size() - rule->first.size(), rule->first.size(), *rule->second);
  }
  return key;
}

std::vector<std::string> WeightsMapper::apply_list(const std::vector<std::string>& names) const {
  std::vector<std::string> out;
  out.reserve(names.size());
  for (const std::string& name : names) {
    if (std::optional<std::string> mapped = map_name(name)) out.push_back(std::move(*mapped));
  }
  return out;
}

}  // namespace fp8kit
