// Quoting of names and paths for error messages (see names.h).
// Tested in tests/cpu/test_safetensors_errors.cpp.
#include "core/names.h"

#include <cerrno>

#include <fmt/format.h>

namespace fp8kit {
namespace {

// The one escaping rule: printable ASCII stays, except the backslash (and the quote inside
// quotes); every other byte becomes \xNN. Text past max_bytes is cut with "...". A whole message
// keeps everything but control bytes: its names and paths are escaped already.
enum class Keep { kPrintableAscii, kQuotedAscii, kAllButControl };

std::string escaped(std::string_view text, size_t max_bytes, Keep keep) {
  std::string out;
  const std::string_view shown = text.substr(0, max_bytes);
  out.reserve(shown.size() + 2);
  for (const char ch : shown) {
    const auto c = static_cast<unsigned char>(ch);
    const bool control = c < 0x20 || c == 0x7f;
    const bool kept = keep == Keep::kAllButControl
                          ? !control
                          : !control && c < 0x80 && c != '\\' && !(keep == Keep::kQuotedAscii && c == '\'');
    if (kept) {
      out += ch;
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  if (text.size() > max_bytes) out += "...";
  return out;
}

}  // namespace

std::string quote_name(std::string_view name) {
  std::string out(1, '\'');
  out += escaped(name, 200, Keep::kQuotedAscii);
  out += '\'';
  return out;
}

std::string shown_path(std::string_view path) {
  // Often an argument next to errno_text(errno), in an unspecified order: errno survives it.
  const int saved_errno = errno;
  std::string out = escaped(path, 4096, Keep::kPrintableAscii);
  errno = saved_errno;
  return out;
}

std::string one_line(std::string_view message) {
  return escaped(message, message.size(), Keep::kAllButControl);
}

}  // namespace fp8kit
