// Quoting of names for error messages (see names.h).
// Tested in tests/cpu/test_safetensors_errors.cpp.
#include "io/names.h"

#include <fmt/format.h>

namespace fp8kit::io {

std::string quote_name(std::string_view name) {
  constexpr size_t kMaxBytes = 200;
  std::string out = "'";
  const std::string_view shown = name.substr(0, kMaxBytes);
  for (const char ch : shown) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
      out += ch;
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  if (name.size() > kMaxBytes) out += "...";
  out += "'";
  return out;
}

}  // namespace fp8kit::io
