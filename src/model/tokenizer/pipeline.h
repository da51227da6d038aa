// The stages of a tokenizer.json pipeline, as Hugging Face tokenizers runs them: normalizer,
// pre-tokenizer, model, post-processor, decoder. Each stage is built from its JSON object by
// make_*(); a type or field fp8kit does not implement is an error naming it, never skipped.
// Reference: huggingface/tokenizers, tokenizers/src/{normalizers,pre_tokenizers,processors,
// decoders}. Tested in tests/cpu/test_tokenizer_components.cpp and tests/python/.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace fp8kit::tok {

using Json = nlohmann::json;

// A piece of text on its way through the pre-tokenizers. `at_text_start`: the piece begins at
// offset 0 of the original text (Metaspace's prepend_scheme "first" prepends only there).
struct Word {
  std::string text;
  bool at_text_start = false;
};

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& text) const = 0;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces each word by the words it splits into; empty words are dropped.
  virtual void pre_tokenize(std::vector<Word>& words) const = 0;
};

// Adds the special tokens of a single sequence (BOS/EOS templates).
class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // `tokens` (when given) holds the token strings of `ids` and is kept in step with them.
  virtual void process(std::vector<int32_t>& ids, std::vector<std::string>* tokens) const = 0;
};

class Decoder {
 public:
  virtual ~Decoder() = default;
  // Rewrites the token strings; the decoded text is their concatenation.
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

// `where` names the JSON path in messages ("tokenizer.json: normalizer"). A null value gives
// nullptr (no stage).
std::unique_ptr<Normalizer> make_normalizer(const Json& j, const std::string& where);
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Json& j, const std::string& where);
std::unique_ptr<PostProcessor> make_post_processor(const Json& j, const std::string& where);
std::unique_ptr<Decoder> make_decoder(const Json& j, const std::string& where);

}  // namespace fp8kit::tok
