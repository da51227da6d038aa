// Strict JSON parsing for hostile files: nesting is bounded before nlohmann sees the text (so no
// input can exhaust the stack of nlohmann's recursive copy, dump and compare), duplicate keys are
// reported (nlohmann would silently keep the last), and every nlohmann error becomes Error(kIo). Fuzzed by fuzz/fuzz_safetensors_header.cpp;
// tested in tests/cpu/test_safetensors_errors.cpp and tests/cpu/test_checkpoint.cpp.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace fp8kit::io {

// Byte offset of the first '[' or '{' (outside strings) that opens level max_depth + 1, or
// std::string_view::npos when `text` never nests that deep.
size_t find_excess_nesting(std::string_view text, size_t max_depth);

// Called for a duplicate key, with the keys of the enclosing objects (outermost first; empty for
// a key of the top-level object). It must throw.
using DuplicateKeyHandler = std::function<void(const std::vector<std::string>& parents, const std::string& key)>;

// Parses `text` as exactly one JSON value (surrounding whitespace allowed). Throws Error(kIo)
// without a file name (callers prefix it) for nesting deeper than max_depth and for syntax
// errors (with line, column and byte offset); calls `on_duplicate` for a repeated key, or ignores
// repeats (last one wins, as Python's json) when it is empty.
template <typename Json>
Json parse_json_strict(std::string_view text, size_t max_depth, const DuplicateKeyHandler& on_duplicate);

// A JSON value for an error message, cut to about `max_chars` characters.
std::string json_excerpt(const nlohmann::json& value, size_t max_chars = 64);

// "object", "array", "string", "integer", "float", "boolean", "null".
const char* json_kind(const nlohmann::json& value);

}  // namespace fp8kit::io
