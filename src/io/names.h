// Quoting of names taken from files for error messages: a hostile tensor or file name must not
// inject newlines or megabytes of text into a message. Tested in tests/cpu/test_safetensors_errors.cpp.
#pragma once

#include <string>
#include <string_view>

namespace fp8kit::io {

// 'name' in single quotes; bytes outside printable ASCII (and the quote and backslash) as \xNN,
// and names longer than 200 bytes cut with "...".
std::string quote_name(std::string_view name);

}  // namespace fp8kit::io
