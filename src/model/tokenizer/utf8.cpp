// UTF-8 helpers of the tokenizer (see utf8.h). Tested in tests/cpu/test_tokenizer_components.cpp.
#include "model/tokenizer/utf8.h"

namespace fp8kit::tok {
namespace {

// Length of the longest valid prefix of a UTF-8 sequence at text[i] (0 for an invalid lead
// byte), and whether the whole sequence is complete and valid: the Unicode "maximal subpart".
struct SequenceCheck {
  size_t valid_prefix = 0;
  bool complete = false;
};

SequenceCheck check_sequence(std::string_view text, size_t i) {
  const auto b0 = static_cast<unsigned char>(text[i]);
  if (b0 < 0x80) return {1, true};
  size_t need = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    if (b0 == 0xE0) lo = 0xA0;  // no overlong forms
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;  // nothing past U+10FFFF
  } else {
    return {0, false};
  }
  size_t k = 1;
  for (; k <= need; ++k) {
    if (i + k >= text.size()) return {k, false};
    const auto b = static_cast<unsigned char>(text[i + k]);
    const bool ok = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) return {k, false};
  }
  return {k, true};
}

}  // namespace

size_t find_invalid_utf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    // ASCII runs dominate real text: skip eight bytes at a time.
    while (i + 8 <= text.size()) {
      uint64_t word;
      __builtin_memcpy(&word, text.data() + i, 8);
      if ((word & 0x8080808080808080ull) != 0) break;
      i += 8;
    }
    if (i >= text.size()) break;
    const SequenceCheck c = check_sequence(text, i);
    if (!c.complete) return i;
    i += c.valid_prefix;
  }
  return std::string_view::npos;
}

char32_t next_code_point(std::string_view text, size_t& i) {
  const auto b0 = static_cast<unsigned char>(text[i]);
  const size_t n = utf8_length(b0);
  char32_t cp = n == 1 ? b0 : n == 2 ? (b0 & 0x1F) : n == 3 ? (b0 & 0x0F) : (b0 & 0x07);
  for (size_t k = 1; k < n && i + k < text.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
  i += n;
  return cp;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool is_white_space(char32_t cp) {
  // The White_Space property of Unicode (PropList.txt); it has not changed since Unicode 6.3.
  if (cp >= 0x09 && cp <= 0x0D) return true;
  if (cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680) return true;
  if (cp >= 0x2000 && cp <= 0x200A) return true;
  return cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

std::string utf8_lossy(std::string_view bytes) {
  if (find_invalid_utf8(bytes) == std::string_view::npos) return std::string(bytes);
  std::string out;
  out.reserve(bytes.size() + 8);
  size_t i = 0;
  while (i < bytes.size()) {
    const SequenceCheck c = check_sequence(bytes, i);
    if (c.complete) {
      out.append(bytes.substr(i, c.valid_prefix));
      i += c.valid_prefix;
    } else {
      out.append(kReplacementChar);
      i += c.valid_prefix == 0 ? 1 : c.valid_prefix;
    }
  }
  return out;
}

}  // namespace fp8kit::tok
