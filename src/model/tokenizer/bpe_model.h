// The BPE model of tokenizer.json: vocabulary, ranked merges, unk token (fused or not), byte
// fallback (<0xNN> tokens), continuing-subword prefix, end-of-word suffix and ignore_merges
// (a word that is itself in the vocabulary is one token). Reference: tokenizers/src/models/bpe/
// {model,word,serialization}.rs. Tested in tests/cpu/test_tokenizer.cpp and tests/python/.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/tokenizer/pair_map.h"

namespace fp8kit::tok {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using Vocab = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// Caps that keep a hostile file from exhausting memory: no real vocabulary comes near them.
inline constexpr int64_t kMaxVocabSize = 1 << 22;

class BpeModel {
 public:
  // From the "model" object; `where` names it in messages.
  BpeModel(const nlohmann::json& model, const std::string& where);

  // Appends the ids of one pre-tokenized word.
  void tokenize(std::string_view word, std::vector<int32_t>& ids) const;

  const Vocab& vocab() const { return vocab_; }
  // Number of entries of the vocabulary (tokenizers' get_vocab_size of the model).
  int64_t size() const { return static_cast<int64_t>(vocab_.size()); }
  // The token of `id`, or nullptr when the vocabulary has no such id.
  const std::string* id_to_token(int32_t id) const;

 private:
  void merge_word(std::string_view word, std::vector<int32_t>& ids) const;
  int32_t lookup(std::string_view s) const;

  Vocab vocab_;
  std::vector<std::string> tokens_;  // by id; holes are empty and not in has_id_
  std::vector<bool> has_id_;
  PairMap merges_;                   // (left, right) -> (rank, merged id)
  std::vector<int32_t> code_point_id_;  // id of each one-code-point token below U+10000, -1 if none
  int32_t unk_id_ = -1;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::string prefix_;  // continuing_subword_prefix
  std::string suffix_;  // end_of_word_suffix
  std::array<int32_t, 256> byte_ids_{};  // <0xNN> tokens for byte_fallback, -1 where missing
};

}  // namespace fp8kit::tok
