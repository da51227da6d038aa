// Hugging Face tokenizers in C++: a model's tokenizer.json (byte-level BPE as in GPT-2, Llama-3,
// Qwen2 and SmolLM; SentencePiece-style BPE with byte fallback as in Llama-2 and Mistral) giving
// the exact ids of the `tokenizers` package, decoding (whole or streamed token by token) and the
// special-token ids of tokenizer_config.json. A tokenizer.json feature fp8kit does not implement
// is an Error naming it. Chat templates (Jinja) are not rendered: no C++ Jinja library is packaged.
// Implementation: src/model/tokenizer/. Tests: tests/cpu/test_tokenizer*.cpp,
// tests/python/test_tokenizer_interop.py. Benchmark: bench/bench_tokenizer.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fp8kit {

class Tokenizer {
 public:
  // `dir` holds tokenizer.json and optionally tokenizer_config.json (bos/eos tokens, chat template).
  static Tokenizer from_directory(const std::string& dir);
  // A tokenizer.json alone (no bos/eos ids unless its post-processor names them).
  static Tokenizer from_file(const std::string& tokenizer_json_path);
  // tokenizer.json text; `name` prefixes error messages.
  static Tokenizer from_json(std::string_view json_text, const std::string& name = "tokenizer.json");

  // Token ids of `text` (UTF-8; invalid UTF-8 is an Error naming the byte offset). With
  // add_special_tokens, the post-processor's template (BOS/EOS) is applied. A text of 1 MiB or
  // more is encoded in parallel between its special tokens (documents joined by EOS, as eval
  // reads them), which gives the same ids.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  // The ids with their token strings, as tokenizers' Encoding.tokens: the vocabulary's string of
  // each id (byte-level tokens as stored, e.g. "Ġthe"), an added token as it matched the text.
  struct Encoding {
    std::vector<int32_t> ids;
    std::vector<std::string> tokens;
  };
  Encoding encode_with_tokens(std::string_view text, bool add_special_tokens = true) const;
  // encode() of every text, in parallel on fp8kit's thread pool (FP8KIT_NUM_THREADS).
  std::vector<std::vector<int32_t>> encode_batch(const std::vector<std::string>& texts, bool add_special_tokens = true) const;

  // Text of `ids` through the decoder; special tokens left out with skip_special_tokens.
  // An id that is not in the vocabulary is an Error.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The vocabulary's string of `id` (byte-level tokens as stored, e.g. "Ġthe"); nullopt if none.
  std::optional<std::string> id_to_token(int32_t id) const;
  // One past the largest id (model vocabulary and added tokens).
  int64_t vocab_size() const;
  bool is_special(int32_t id) const;

  // tokenizer_config.json's bos_token / eos_token as ids (nullopt when not given).
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  // tokenizer_config.json's chat_template (Jinja source; empty when none).
  const std::string& chat_template() const;

  struct Impl;
  explicit Tokenizer(std::shared_ptr<const Impl> impl);

 private:
  std::shared_ptr<const Impl> impl_;
};

// Decodes ids as they are generated: step() returns the text that `id` completes, and holds text
// back while it ends in an incomplete UTF-8 sequence (U+FFFD), exactly as tokenizers'
// DecodeStream does; the concatenation of the steps is a prefix of decode(all ids).
class DecodeStream {
 public:
  explicit DecodeStream(const Tokenizer& tokenizer, bool skip_special_tokens = false);
  std::string step(int32_t id);
  // What is still held back (ends with U+FFFD when the ids end inside a UTF-8 sequence).
  std::string flush();

 private:
  Tokenizer tokenizer_;
  bool skip_special_tokens_;
  std::vector<int32_t> ids_;
  std::string prefix_;
  size_t prefix_index_ = 0;
};

}  // namespace fp8kit
