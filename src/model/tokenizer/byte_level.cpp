// GPT-2's byte-level alphabet (see byte_level.h).
#include "model/tokenizer/byte_level.h"

#include "model/tokenizer/utf8.h"

namespace fp8kit::tok {

const ByteLevelAlphabet& ByteLevelAlphabet::get() {
  static const ByteLevelAlphabet alphabet = [] {
    ByteLevelAlphabet a;
    a.code_point_to_byte.fill(-1);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      const int cp = printable ? b : next++;
      append_utf8(a.byte_to_text[b], static_cast<char32_t>(cp));
      a.code_point_to_byte[cp] = static_cast<int16_t>(b);
    }
    return a;
  }();
  return alphabet;
}

void byte_level_encode(std::string_view bytes, std::string& out) {
  const ByteLevelAlphabet& a = ByteLevelAlphabet::get();
  for (const char c : bytes) out += a.byte_to_text[static_cast<unsigned char>(c)];
}

bool byte_level_decode(std::string_view token, std::string& out) {
  const ByteLevelAlphabet& a = ByteLevelAlphabet::get();
  const size_t mark = out.size();
  size_t i = 0;
  while (i < token.size()) {
    const char32_t cp = next_code_point(token, i);
    if (cp >= a.code_point_to_byte.size() || a.code_point_to_byte[cp] < 0) {
      out.resize(mark);
      return false;
    }
    out += static_cast<char>(a.code_point_to_byte[cp]);
  }
  return true;
}

}  // namespace fp8kit::tok
