// Python str semantics used by the spec's name handling (see py_string.h). Spec 1.1.
// Tested in tests/cpu/test_quantization_config.cpp (QuantizationConfigPyString).
#include "layers/py_string.h"

#include <fmt/format.h>

namespace fp8kit::py {

std::string replace_all(std::string_view s, std::string_view old, std::string_view replacement) {
  std::string out;
  if (old.empty()) {
    out.reserve(s.size() + (s.size() + 1) * replacement.size());
    for (char c : s) {
      out.append(replacement);
      out.push_back(c);
    }
    out.append(replacement);
    return out;
  }
  size_t pos = 0;
  for (size_t hit = s.find(old); hit != std::string_view::npos; hit = s.find(old, pos)) {
    out.append(s.substr(pos, hit - pos));
    out.append(replacement);
    pos = hit + old.size();
  }
  out.append(s.substr(pos));
  return out;
}

std::string_view last_component(std::string_view s, char sep) {
  size_t cut = s.rfind(sep);
  return cut == std::string_view::npos ? s : s.substr(cut + 1);
}

namespace {

// str.__repr__ for the ASCII range: single quotes unless the text holds a single quote and no
// double quote; backslash, the quote in use and control characters are escaped. Bytes >= 0x80
// (UTF-8) pass through, as Python prints printable non-ASCII text unescaped.
std::string str_repr(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos;
  bool has_double = s.find('"') != std::string::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    if (c == quote || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out.push_back(c);
    }
  }
  out.push_back(quote);
  return out;
}

}  // namespace

std::string list_repr(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ", ";
    out += str_repr(items[i]);
  }
  out += "]";
  return out;
}

}  // namespace fp8kit::py
