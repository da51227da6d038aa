// UTF-8 helpers of the tokenizer: validation (input text and tokenizer.json strings), one-code-point
// decoding and encoding, Unicode White_Space (Rust's char::is_whitespace, used by added tokens'
// lstrip/rstrip and the Strip normalizer) and Rust's String::from_utf8_lossy (the decoders).
// Tested in tests/cpu/test_tokenizer_components.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace fp8kit::tok {

// Byte offset of the first byte that does not start a valid UTF-8 sequence (overlong forms,
// surrogates and code points past U+10FFFF are invalid), or npos when `text` is valid.
size_t find_invalid_utf8(std::string_view text);

// Length of the UTF-8 sequence that starts with `lead` (1 for bytes that do not start one).
inline size_t utf8_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xF0) return 4;
  if (lead >= 0xE0) return 3;
  if (lead >= 0xC0) return 2;
  return 1;
}

// The code point starting at text[i] of valid UTF-8; advances i past it.
char32_t next_code_point(std::string_view text, size_t& i);

void append_utf8(std::string& out, char32_t cp);

// Unicode White_Space: what Rust's char::is_whitespace and its regex crate's \s match.
bool is_white_space(char32_t cp);

// Rust's String::from_utf8_lossy: every maximal invalid subsequence becomes one U+FFFD.
std::string utf8_lossy(std::string_view bytes);

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

}  // namespace fp8kit::tok
