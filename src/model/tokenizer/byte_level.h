// GPT-2's byte-level alphabet: every byte is shown as one printable code point (bytes 33-126,
// 161-172 and 174-255 as themselves, the other 68 as U+0100 onwards in byte order), so that BPE
// vocabularies hold any byte string as text. Reference: tokenizers/src/pre_tokenizers/byte_level.rs
// (bytes_char). Tested in tests/cpu/test_tokenizer_components.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace fp8kit::tok {

struct ByteLevelAlphabet {
  std::array<std::string, 256> byte_to_text;  // UTF-8 of each byte's code point
  std::array<int16_t, 324> code_point_to_byte;  // -1 where a code point shows no byte

  static const ByteLevelAlphabet& get();
};

// Appends the byte-level text of `bytes` to `out`.
void byte_level_encode(std::string_view bytes, std::string& out);

// The bytes a byte-level token shows; false (and `out` unchanged) when a code point of `token`
// is not in the alphabet.
bool byte_level_decode(std::string_view token, std::string& out);

// The GPT-2 pre-tokenizer pattern that ByteLevel uses when use_regex is true.
inline constexpr const char* kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace fp8kit::tok
