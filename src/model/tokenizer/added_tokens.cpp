// Added-token matching (see added_tokens.h).
#include "model/tokenizer/added_tokens.h"

#include <algorithm>

#include "model/tokenizer/utf8.h"

namespace fp8kit::tok {
namespace {

// Rust's regex \w (Unicode word characters, UTS #18 annex C), which tokenizers' single_word uses.
constexpr const char* kWordClass = "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}]";

size_t previous_code_point_start(std::string_view text, size_t end) {
  size_t i = end - 1;
  while (i > 0 && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) --i;
  return i;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens, const std::vector<std::string>& patterns)
    : tokens_(std::move(tokens)) {
  trie_.emplace_back();
  for (size_t t = 0; t < tokens_.size(); ++t) {
    const std::string& p = patterns[t];
    if (p.empty()) continue;
    first_byte_[static_cast<unsigned char>(p[0])] = true;
    int32_t node = 0;
    for (const char c : p) {
      const auto byte = static_cast<unsigned char>(c);
      int32_t next = child(node, byte);
      if (next < 0) {
        next = static_cast<int32_t>(trie_.size());
        auto& children = trie_[node].children;
        children.insert(std::upper_bound(children.begin(), children.end(), std::make_pair(byte, INT32_MIN),
                                         [](const auto& a, const auto& b) { return a.first < b.first; }),
                        {byte, next});
        trie_.emplace_back();
      }
      node = next;
    }
    // The first of two identical patterns wins (tokenizers' pattern order).
    if (trie_[node].token < 0) trie_[node].token = static_cast<int32_t>(t);
  }
  const bool any_single_word = std::any_of(tokens_.begin(), tokens_.end(), [](const AddedToken& t) { return t.single_word; });
  if (any_single_word) {
    word_start_ = std::make_unique<Regex>(kWordClass, "added tokens");
    word_end_ = std::make_unique<Regex>(kWordClass, "added tokens");
  }
}

int32_t AddedTokenMatcher::child(int32_t node, unsigned char byte) const {
  const auto& children = trie_[node].children;
  const auto it = std::lower_bound(children.begin(), children.end(), byte,
                                   [](const auto& a, unsigned char b) { return a.first < b; });
  return it != children.end() && it->first == byte ? it->second : -1;
}

std::pair<int32_t, size_t> AddedTokenMatcher::longest_at(std::string_view text, size_t pos) const {
  std::pair<int32_t, size_t> best{-1, 0};
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    node = child(node, static_cast<unsigned char>(text[i]));
    if (node < 0) break;
    if (trie_[node].token >= 0) best = {trie_[node].token, i + 1 - pos};
  }
  return best;
}

std::vector<TextSplit> AddedTokenMatcher::split(std::string_view text) const {
  if (text.empty()) return {{0, 0, -1}};
  std::vector<TextSplit> splits;
  size_t start_offset = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    if (!first_byte_[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    const auto [index, length] = longest_at(text, pos);
    if (index < 0) {
      ++pos;
      continue;
    }
    const AddedToken& token = tokens_[index];
    size_t start = pos, stop = pos + length;
    pos = stop;  // matches never overlap, even when one is discarded below
    if (token.single_word) {
      bool word_before = false, word_after = false;
      if (start > 0) word_before = word_end_->matches_at_start(text.substr(previous_code_point_start(text, start)));
      if (stop < text.size()) word_after = word_start_->matches_at_start(text.substr(stop));
      if (word_before || word_after) continue;
    }
    if (token.lstrip) {
      size_t s = start;
      while (s > 0) {
        const size_t b = previous_code_point_start(text, s);
        size_t i = b;
        if (!is_white_space(next_code_point(text, i))) break;
        s = b;
      }
      start = std::max(s, start_offset);
    }
    if (token.rstrip) {
      while (stop < text.size()) {
        size_t i = stop;
        if (!is_white_space(next_code_point(text, i))) break;
        stop = i;
      }
    }
    if (start_offset < start) splits.push_back({start_offset, start, -1});
    splits.push_back({start, stop, token.id});
    start_offset = stop;
  }
  if (start_offset != text.size()) splits.push_back({start_offset, text.size(), -1});
  return splits;
}

}  // namespace fp8kit::tok
