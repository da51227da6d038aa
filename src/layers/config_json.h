// Typed reads of a checkpoint's quantization_config values. A JSON value of the wrong type is
// bad input: Error(kInvalidArgument) naming the key and the expected type, never an nlohmann
// exception. Spec 1.1 (from_config). Tested in tests/cpu/test_fp8_config.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>  // not json.hpp: it costs each file that includes it ~1.7 s to compile

namespace fp8kit::config_json {

// "null", "boolean", "string", "integer", "float", "array" or "object".
const char* kind_name(const nlohmann::ordered_json& value);

// The first of `keys` present in the object `config` with a non-null value, or nullptr.
// `found_key` (if given) receives that key.
const nlohmann::ordered_json* find_non_null(const nlohmann::ordered_json& config, const std::vector<std::string>& keys,
                                            std::string* found_key = nullptr);

std::string as_string(const nlohmann::ordered_json& value, std::string_view key);
std::vector<std::string> as_string_list(const nlohmann::ordered_json& value, std::string_view key);
std::vector<int64_t> as_int_list(const nlohmann::ordered_json& value, std::string_view key);

}  // namespace fp8kit::config_json
