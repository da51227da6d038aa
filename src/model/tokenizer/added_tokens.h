// Added tokens (tokenizer.json's "added_tokens"): found in the text before anything else splits
// it, leftmost first and longest at one position (tokenizers' aho-corasick LeftmostLongest), with
// the lstrip / rstrip / single_word flags; `normalized` tokens are matched in the normalized text.
// Reference: tokenizers/src/tokenizer/added_vocabulary.rs (find_matches, extract_and_normalize).
// Tested in tests/cpu/test_tokenizer.cpp and tests/python/.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/tokenizer/regex.h"

namespace fp8kit::tok {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  // Its string as an id: the content, normalized when `normalized` (tokenizers' id_to_token and
  // decode give "▁hello▁world" for a normalized "hello world" under a Llama-2 normalizer).
  std::string text;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
};

// A piece of text between matches (id < 0) or a matched added token (id >= 0), as byte offsets.
struct TextSplit {
  size_t begin, end;
  int32_t id;
};

// Matches one set of added tokens (the non-normalized or the normalized ones).
class AddedTokenMatcher {
 public:
  // `patterns[i]` is what token `tokens[i]` matches (its content, or its normalized content).
  AddedTokenMatcher(std::vector<AddedToken> tokens, const std::vector<std::string>& patterns);

  bool empty() const { return tokens_.empty(); }

  // The splits covering `text` in order; [(0, 0, -1)] for empty text.
  std::vector<TextSplit> split(std::string_view text) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;  // sorted by byte
    int32_t token = -1;  // index into tokens_ of the pattern ending here
  };
  int32_t child(int32_t node, unsigned char byte) const;
  // The longest pattern starting at text[pos]: (token index, length), or (-1, 0).
  std::pair<int32_t, size_t> longest_at(std::string_view text, size_t pos) const;

  std::vector<AddedToken> tokens_;
  std::vector<Node> trie_;
  bool first_byte_[256] = {};
  std::unique_ptr<Regex> word_start_;  // Rust regex \w at the start / end, for single_word
  std::unique_ptr<Regex> word_end_;
};

}  // namespace fp8kit::tok
