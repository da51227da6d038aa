// Names and paths taken from files and command lines, made safe for one-line error messages: a
// hostile tensor or file name must not inject newlines, terminal escapes or megabytes of text into
// a message. One escaping rule for both. Tested in tests/cpu/test_safetensors_errors.cpp and
// tests/cpu/test_cli.cpp (ErrorsNameEscapedPaths).
#pragma once

#include <string>
#include <string_view>

namespace fp8kit {

// 'name' in single quotes; bytes outside printable ASCII (and the quote and backslash) as \xNN,
// and names longer than 200 bytes cut with "...".
std::string quote_name(std::string_view name);

// A path as is when it is printable ASCII without a backslash; otherwise those bytes as \xNN
// (the rule of quote_name, without quotes; cut after 4096 bytes). Leaves errno as it was.
std::string shown_path(std::string_view path);

// A whole message on one line: control bytes (newlines, escapes) as \xNN, everything else as is.
// The last guard of the command line's one-line errors, for text that did not come through the
// two functions above (a std::exception's what()).
std::string one_line(std::string_view message);

}  // namespace fp8kit
