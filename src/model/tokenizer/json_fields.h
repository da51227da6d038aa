// Typed access to the fields of tokenizer.json's objects, with errors that name the JSON path
// ("tokenizer.json: pre_tokenizer.pretokenizers[1]: field 'pattern' is missing").
// Tested through tests/cpu/test_tokenizer_errors.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

namespace fp8kit::tok {

using Json = nlohmann::json;

const Json& field(const Json& object, const char* name, const std::string& where);
std::string string_field(const Json& object, const char* name, const std::string& where);
// A missing field or null gives `fallback`.
bool bool_field(const Json& object, const char* name, bool fallback, const std::string& where);
int64_t int_field(const Json& object, const char* name, int64_t fallback, const std::string& where);
// The "pattern" field of Split and Replace: {"String": "..."} or {"Regex": "..."} -> (text, is_regex).
std::pair<std::string, bool> pattern_field(const Json& object, const std::string& where);

// The object's "type" (Error when it is not an object or has no string "type").
std::string type_of(const Json& object, const std::string& where);

// "<where> type '<type>' is not supported" (`where`: "tokenizer.json: normalizer", whose last
// word names the kind of stage).
[[noreturn]] void unsupported_type(const std::string& where, const char* kind, const std::string& type);

}  // namespace fp8kit::tok
