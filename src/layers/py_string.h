// Python str semantics the spec's name handling relies on (str.replace, str.split(".")[-1], the
// repr of a list of str in error texts). Spec 1.1 (is_layer_skipped, get_cache_scale,
// get_from_keys). Tested through tests/cpu/test_quantization_config.cpp (QuantizationConfigPyString).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace fp8kit::py {

// s.replace(old, new): every non-overlapping occurrence, left to right. An empty `old` inserts
// `replacement` before every character and at the end, as Python does.
std::string replace_all(std::string_view s, std::string_view old, std::string_view replacement);

// s.split(sep)[-1] for a one-character separator: the text after the last `sep`, or s itself.
std::string_view last_component(std::string_view s, char sep);

// repr(list_of_str): ['a', 'b'], quoting each item as Python's str.__repr__ does.
std::string list_repr(const std::vector<std::string>& items);

}  // namespace fp8kit::py
