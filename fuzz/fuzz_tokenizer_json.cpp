// libFuzzer target for tokenizer.json loading and the encode/decode pipeline
// (src/model/tokenizer/). The input is a tokenizer.json, optionally followed by "\n\x01\n" and a
// text to encode. Loading must succeed or throw fp8kit::Error; a loaded tokenizer must encode
// any valid UTF-8 text into ids of its vocabulary, which decode. Any other
// exception, a crash, a hang or a sanitizer report is a finding.
// Run with scripts/fuzz (seed corpus: fuzz/corpus/tokenizer_json/).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "fp8kit/error.h"
#include "fp8kit/model/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t cut = input.find("\n\x01\n");
  const std::string_view json = input.substr(0, cut);
  const std::string_view text = cut == std::string_view::npos ? std::string_view("Hello world <|end|> 123 \xc3\xa9")
                                                              : input.substr(cut + 3);
  try {
    const fp8kit::Tokenizer tokenizer = fp8kit::Tokenizer::from_json(json);
    std::vector<int32_t> ids;
    try {
      ids = tokenizer.encode(text);
    } catch (const fp8kit::Error&) {
      return 0;  // invalid UTF-8 text, or a matching limit of the split pattern
    }
    for (const int32_t id : ids) {
      if (id < 0 || id >= tokenizer.vocab_size() || !tokenizer.id_to_token(id)) {
        std::fprintf(stderr, "broken invariant: id %d out of range\n", id);
        std::abort();
      }
    }
    try {
      (void)tokenizer.decode(ids);
      (void)tokenizer.decode(ids, /*skip_special_tokens=*/true);
    } catch (const fp8kit::Error& e) {
      std::fprintf(stderr, "broken invariant: the ids of encode() do not decode: %s\n", e.what());
      std::abort();
    }
  } catch (const fp8kit::Error&) {
  }
  return 0;
}
