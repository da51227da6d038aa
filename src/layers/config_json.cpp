// Typed reads of quantization_config values (see config_json.h). Spec 1.1.
// Tested in tests/cpu/test_fp8_config.cpp (Fp8ConfigFromConfig* suites).
#include "layers/config_json.h"

#include <limits>

#include <nlohmann/json.hpp>

#include "core/check.h"

namespace fp8kit::config_json {

using nlohmann::ordered_json;

const char* kind_name(const ordered_json& value) {
  if (value.is_null()) return "null";
  if (value.is_boolean()) return "boolean";
  if (value.is_string()) return "string";
  if (value.is_number_integer()) return "integer";
  if (value.is_number()) return "float";
  if (value.is_array()) return "array";
  if (value.is_object()) return "object";
  return "binary";
}

const ordered_json* find_non_null(const ordered_json& config, const std::vector<std::string>& keys,
                                  std::string* found_key) {
  if (!config.is_object()) return nullptr;
  for (const std::string& key : keys) {
    auto it = config.find(key);
    if (it != config.end() && !it->is_null()) {
      if (found_key != nullptr) *found_key = key;
      return &*it;
    }
  }
  return nullptr;
}

std::string as_string(const ordered_json& value, std::string_view key) {
  FP8KIT_CHECK_ARG(value.is_string(), "quantization config key '{}' must be a string, got {}", key,
                   kind_name(value));
  return value.get<std::string>();
}

std::vector<std::string> as_string_list(const ordered_json& value, std::string_view key) {
  FP8KIT_CHECK_ARG(value.is_array(), "quantization config key '{}' must be a list of strings, got {}", key,
                   kind_name(value));
  std::vector<std::string> out;
  out.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    const ordered_json& item = value[i];
    FP8KIT_CHECK_ARG(item.is_string(), "quantization config key '{}' must be a list of strings, got {} at index {}",
                     key, kind_name(item), i);
    out.push_back(item.get<std::string>());
  }
  return out;
}

std::vector<int64_t> as_int_list(const ordered_json& value, std::string_view key) {
  FP8KIT_CHECK_ARG(value.is_array(), "quantization config key '{}' must be a list of integers, got {}", key,
                   kind_name(value));
  std::vector<int64_t> out;
  out.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    const ordered_json& item = value[i];
    FP8KIT_CHECK_ARG(item.is_number_integer(),
                     "quantization config key '{}' must be a list of integers, got {} at index {}", key,
                     kind_name(item), i);
    // nlohmann stores integers above INT64_MAX as unsigned; they do not fit the block size type.
    FP8KIT_CHECK_ARG(!item.is_number_unsigned() ||
                         item.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
                     "quantization config key '{}' holds an integer out of range at index {}", key, i);
    out.push_back(item.get<int64_t>());
  }
  return out;
}

}  // namespace fp8kit::config_json
