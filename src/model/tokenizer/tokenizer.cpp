// fp8kit::Tokenizer: loading from a checkpoint directory, the encode pipeline (tokenizers' order:
// raw added tokens, normalizer, normalized added tokens, pre-tokenizer, BPE, post-processor),
// batches and long texts on the thread pool, and decoding. Reference: tokenizers/src/tokenizer/mod.rs
// (encode_single_sequence, decode). Tests: tests/cpu/test_tokenizer.cpp, tests/python/.
#include "fp8kit/model/tokenizer.h"

#include <algorithm>
#include <filesystem>

#include "core/check.h"
#include "core/parallel.h"
#include "model/tokenizer/tokenizer_impl.h"
#include "model/tokenizer/utf8.h"

namespace fp8kit {
namespace {

// tokenizer.json files of current models are 2-35 MB; the cap bounds what a hostile file costs.
constexpr size_t kMaxTokenizerJsonBytes = 128u << 20;
// encode() of a text at least this long runs its pieces between added tokens in parallel.
constexpr size_t kParallelEncodeBytes = 1u << 20;

// Words seen before keep their ids: natural text repeats most words. One cache per thread and
// tokenizer (tokenizers keeps one per model); `owner` is the tokenizer's load number, never reused.
class WordCache {
 public:
  // The cached ids of `word` appended to `ids`; false when not cached.
  bool find(std::string_view word, std::vector<int32_t>& ids) const {
    const auto it = index_.find(word);
    if (it == index_.end()) return false;
    ids.insert(ids.end(), store_.begin() + it->second.first, store_.begin() + it->second.first + it->second.second);
    return true;
  }
  void reset_for(uint64_t owner) {
    if (owner == owner_) return;
    owner_ = owner;
    index_.clear();
    store_.clear();
  }
  void put(std::string_view word, const int32_t* first, size_t n) {
    if (word.size() > kMaxWordBytes) return;
    if (index_.size() >= kMaxWords) {
      index_.clear();
      store_.clear();
    }
    index_.emplace(std::string(word), std::make_pair(store_.size(), n));
    store_.insert(store_.end(), first, first + n);
  }

 private:
  static constexpr size_t kMaxWords = 1 << 16;
  static constexpr size_t kMaxWordBytes = 256;
  std::unordered_map<std::string, std::pair<size_t, size_t>, tok::StringHash, std::equal_to<>> index_;
  std::vector<int32_t> store_;
  uint64_t owner_ = 0;
};

void check_utf8(std::string_view text) {
  const size_t bad = tok::find_invalid_utf8(text);
  FP8KIT_CHECK_ARG(bad == std::string_view::npos, "text to encode is not valid UTF-8 (byte {} of {})", bad, text.size());
}

}  // namespace

std::vector<tok::TextSplit> Tokenizer::Impl::raw_splits(std::string_view text) const {
  if (raw_matcher) return raw_matcher->split(text);
  return {{0, text.size(), -1}};
}

void Tokenizer::Impl::encode_text(std::string_view text, std::vector<int32_t>& ids,
                                  std::vector<std::string>* tokens) const {
  encode_splits(text, raw_splits(text), ids, tokens);
}

void Tokenizer::Impl::encode_splits(std::string_view text, std::span<const tok::TextSplit> raw, std::vector<int32_t>& ids,
                                    std::vector<std::string>* tokens) const {
  thread_local WordCache cache;
  cache.reset_for(load_number);
  std::vector<tok::Word> words;
  auto push_added = [&](int32_t id, std::string_view matched) {
    ids.push_back(id);
    if (tokens) tokens->emplace_back(matched);
  };
  auto tokenize_words = [&] {
    for (const tok::Word& w : words) {
      const size_t first = ids.size();
      if (!cache.find(w.text, ids)) {
        model->tokenize(w.text, ids);
        cache.put(w.text, ids.data() + first, ids.size() - first);
      }
      if (tokens) {
        for (size_t i = first; i < ids.size(); ++i) tokens->push_back(*model->id_to_token(ids[i]));
      }
    }
  };
  // A piece between raw added tokens: normalized, split at normalized added tokens, pre-tokenized.
  auto encode_piece = [&](std::string_view raw, bool at_text_start) {
    std::string normalized(raw);
    if (normalizer) normalizer->normalize(normalized);
    if (normalized.empty()) return;
    const std::vector<tok::TextSplit> splits =
        normalized_matcher ? normalized_matcher->split(normalized) : std::vector<tok::TextSplit>{{0, normalized.size(), -1}};
    for (const tok::TextSplit& s : splits) {
      if (s.id >= 0) {
        push_added(s.id, std::string_view(normalized).substr(s.begin, s.end - s.begin));
        continue;
      }
      if (s.end == s.begin) continue;
      words.assign(1, tok::Word{normalized.substr(s.begin, s.end - s.begin), at_text_start && s.begin == 0});
      if (pre_tokenizer) pre_tokenizer->pre_tokenize(words);
      tokenize_words();
    }
  };
  for (const tok::TextSplit& s : raw) {
    if (s.id >= 0) {
      push_added(s.id, text.substr(s.begin, s.end - s.begin));
    } else if (s.end > s.begin) {
      encode_piece(text.substr(s.begin, s.end - s.begin), s.begin == 0);
    }
  }
}

const std::string* Tokenizer::Impl::token_of(int32_t id) const {
  const auto it = added_by_id.find(id);
  if (it != added_by_id.end()) return &added_tokens[it->second].text;
  return model->id_to_token(id);
}

Tokenizer::Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

Tokenizer Tokenizer::from_json(std::string_view json_text, const std::string& name) {
  return Tokenizer(tok::load_tokenizer_json(json_text, name));
}

Tokenizer Tokenizer::from_file(const std::string& path) {
  return Tokenizer(tok::load_tokenizer_json(tok::read_regular_file(path, kMaxTokenizerJsonBytes), path));
}

Tokenizer Tokenizer::from_directory(const std::string& dir) {
  const std::string json_path = (std::filesystem::path(dir) / "tokenizer.json").string();
  FP8KIT_CHECK(std::filesystem::exists(json_path), ErrorCode::kIo, "{}: no tokenizer.json in this directory", dir);
  auto impl = tok::load_tokenizer_json(tok::read_regular_file(json_path, kMaxTokenizerJsonBytes), json_path);
  const std::string config_path = (std::filesystem::path(dir) / "tokenizer_config.json").string();
  if (std::filesystem::exists(config_path)) tok::load_tokenizer_config(config_path, *impl);
  return Tokenizer(std::move(impl));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  check_utf8(text);
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  const std::vector<tok::TextSplit> splits = impl_->raw_splits(text);
  if (text.size() < kParallelEncodeBytes || splits.size() < 2 || num_threads() < 2) {
    impl_->encode_splits(text, splits, ids, nullptr);
  } else {
    // tokenizers encodes every piece between two (non-normalized) added tokens on its own, so
    // groups of consecutive pieces encoded apart and joined in order give the very same ids.
    const size_t groups = std::min<size_t>(splits.size(), static_cast<size_t>(num_threads()) * 4);
    std::vector<size_t> starts = {0};
    size_t bytes = 0;
    for (size_t i = 0; i < splits.size(); ++i) {
      bytes += splits[i].end - splits[i].begin;
      if (bytes * groups >= text.size() * starts.size() && i + 1 < splits.size()) starts.push_back(i + 1);
    }
    starts.push_back(splits.size());
    std::vector<std::vector<int32_t>> parts(starts.size() - 1);
    parallel_for(static_cast<int64_t>(parts.size()), 1, [&](int64_t begin, int64_t end) {
      for (int64_t g = begin; g < end; ++g) {
        impl_->encode_splits(text, std::span(splits).subspan(starts[g], starts[g + 1] - starts[g]), parts[g], nullptr);
      }
    });
    for (const auto& part : parts) ids.insert(ids.end(), part.begin(), part.end());
  }
  if (add_special_tokens && impl_->post_processor) impl_->post_processor->process(ids, nullptr);
  return ids;
}

Tokenizer::Encoding Tokenizer::encode_with_tokens(std::string_view text, bool add_special_tokens) const {
  check_utf8(text);
  Encoding e;
  impl_->encode_text(text, e.ids, &e.tokens);
  if (add_special_tokens && impl_->post_processor) impl_->post_processor->process(e.ids, &e.tokens);
  return e;
}

std::vector<std::vector<int32_t>> Tokenizer::encode_batch(const std::vector<std::string>& texts,
                                                          bool add_special_tokens) const {
  for (size_t i = 0; i < texts.size(); ++i) {
    const size_t bad = tok::find_invalid_utf8(texts[i]);
    FP8KIT_CHECK_ARG(bad == std::string_view::npos, "text {} to encode is not valid UTF-8 (byte {} of {})", i, bad,
                     texts[i].size());
  }
  std::vector<std::vector<int32_t>> out(texts.size());
  parallel_for(static_cast<int64_t>(texts.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = encode(texts[i], add_special_tokens);
  });
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const int32_t id : ids) {
    const std::string* token = impl_->token_of(id);
    FP8KIT_CHECK_ARG(token != nullptr, "token id {} is not in the vocabulary of {} ({} ids)", id, impl_->name,
                     impl_->vocab_size);
    if (skip_special_tokens && is_special(id)) continue;
    tokens.push_back(*token);
  }
  if (!impl_->decoder) {
    std::string joined;
    for (size_t i = 0; i < tokens.size(); ++i) joined += (i > 0 ? " " : "") + tokens[i];
    return joined;
  }
  impl_->decoder->decode_chain(tokens);
  std::string text;
  for (const std::string& t : tokens) text += t;
  return text;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  const auto added = impl_->added_by_content.find(token);
  if (added != impl_->added_by_content.end()) return added->second;
  const auto it = impl_->model->vocab().find(token);
  if (it == impl_->model->vocab().end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> Tokenizer::id_to_token(int32_t id) const {
  const std::string* token = impl_->token_of(id);
  if (token == nullptr) return std::nullopt;
  return *token;
}

int64_t Tokenizer::vocab_size() const { return impl_->vocab_size; }

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < static_cast<int64_t>(impl_->special.size()) && impl_->special[id];
}

std::optional<int32_t> Tokenizer::bos_id() const { return impl_->bos_id; }
std::optional<int32_t> Tokenizer::eos_id() const { return impl_->eos_id; }
const std::string& Tokenizer::chat_template() const { return impl_->chat_template; }

}  // namespace fp8kit
