// fp8kit::DecodeStream: streamed decoding with tokenizers' DecodeStream algorithm (decode a
// window of recent ids, emit what extends the previous window's text unless it ends in U+FFFD,
// then slide the window). Reference: tokenizers/src/tokenizer/mod.rs (step_decode_stream).
// Tested in tests/cpu/test_tokenizer.cpp.
#include "core/check.h"
#include "fp8kit/model/tokenizer.h"
#include "model/tokenizer/utf8.h"

namespace fp8kit {

DecodeStream::DecodeStream(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}

std::string DecodeStream::step(int32_t id) {
  ids_.push_back(id);
  const std::string text = tokenizer_.decode(ids_, skip_special_tokens_);
  const bool ends_incomplete = text.size() >= tok::kReplacementChar.size() &&
                               text.compare(text.size() - tok::kReplacementChar.size(), std::string::npos,
                                            tok::kReplacementChar) == 0;
  if (text.size() <= prefix_.size() || ends_incomplete) return {};
  FP8KIT_CHECK(text.compare(0, prefix_.size(), prefix_) == 0, ErrorCode::kInvalidArgument,
               "decode stream: the text of the last ids does not extend the text before them");
  std::string new_text = text.substr(prefix_.size());
  const size_t new_prefix_index = ids_.size() - prefix_index_;
  ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(prefix_index_));
  prefix_ = tokenizer_.decode(ids_, skip_special_tokens_);
  prefix_index_ = new_prefix_index;
  return new_text;
}

std::string DecodeStream::flush() {
  const std::string text = tokenizer_.decode(ids_, skip_special_tokens_);
  std::string rest = text.size() > prefix_.size() ? text.substr(prefix_.size()) : std::string();
  ids_.clear();
  prefix_.clear();
  prefix_index_ = 0;
  return rest;
}

}  // namespace fp8kit
