// The parts of a loaded tokenizer (Tokenizer::Impl) and the encode pipeline over them, in
// tokenizers' order: raw added tokens -> normalizer -> normalized added tokens -> pre-tokenizer
// -> BPE per word -> post-processor. Built by tokenizer_load.cpp; used by tokenizer.cpp.
// Tested in tests/cpu/test_tokenizer*.cpp and tests/python/test_tokenizer_interop.py.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "fp8kit/model/tokenizer.h"
#include "model/tokenizer/added_tokens.h"
#include "model/tokenizer/bpe_model.h"
#include "model/tokenizer/pipeline.h"

namespace fp8kit {

struct Tokenizer::Impl {
  std::string name;  // for messages: the tokenizer.json path
  uint64_t load_number = 0;  // distinct for every tokenizer loaded in the process (word caches)
  std::unique_ptr<tok::Normalizer> normalizer;
  std::unique_ptr<tok::PreTokenizer> pre_tokenizer;
  std::unique_ptr<tok::BpeModel> model;
  std::unique_ptr<tok::PostProcessor> post_processor;
  std::unique_ptr<tok::Decoder> decoder;

  std::vector<tok::AddedToken> added_tokens;
  std::unordered_map<int32_t, size_t> added_by_id;  // -> index into added_tokens
  tok::Vocab added_by_content;
  std::unique_ptr<tok::AddedTokenMatcher> raw_matcher;         // normalized == false
  std::unique_ptr<tok::AddedTokenMatcher> normalized_matcher;  // normalized == true
  std::vector<bool> special;                                   // by id
  int64_t vocab_size = 0;

  std::optional<int32_t> bos_id, eos_id;
  std::string chat_template;

  // Appends the ids of `text` (valid UTF-8) without the post-processor, and when `tokens` is
  // given their strings as tokenizers' Encoding.tokens has them (an added token as matched).
  void encode_text(std::string_view text, std::vector<int32_t>& ids, std::vector<std::string>* tokens) const;
  // The text's pieces between non-normalized added tokens, and those tokens (one split without them).
  std::vector<tok::TextSplit> raw_splits(std::string_view text) const;
  // encode_text() of the pieces `raw` of `text` (a run of raw_splits(text)).
  void encode_splits(std::string_view text, std::span<const tok::TextSplit> raw, std::vector<int32_t>& ids,
                     std::vector<std::string>* tokens) const;
  // The token string of `id`, or nullptr when neither an added token nor the model has it.
  const std::string* token_of(int32_t id) const;
};

namespace tok {

// The parts of a tokenizer.json (`name` prefixes messages).
std::shared_ptr<Tokenizer::Impl> load_tokenizer_json(std::string_view text, const std::string& name);

// Reads bos/eos tokens and the chat template of a tokenizer_config.json into `impl`.
void load_tokenizer_config(const std::string& path, Tokenizer::Impl& impl);

// Reads a whole regular file of at most `max_bytes`: a FIFO, a device or a directory is an
// Error (never a hang), and so is a larger file.
std::string read_regular_file(const std::string& path, size_t max_bytes);

}  // namespace tok
}  // namespace fp8kit
