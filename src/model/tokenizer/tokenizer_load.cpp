// Loading tokenizer.json and tokenizer_config.json into Tokenizer::Impl: size caps, the top-level
// fields, the added tokens (ids checked the way tokenizers assigns them) and the two matchers.
// Reference: tokenizers/src/tokenizer/serialization.rs and added_vocabulary.rs (add_tokens).
// Tested in tests/cpu/test_tokenizer_errors.cpp and tests/cpu/test_tokenizer_components.cpp.
#include <algorithm>
#include <atomic>

#include "core/check.h"
#include "io/json_util.h"
#include "model/tokenizer/json_fields.h"
#include "model/tokenizer/tokenizer_impl.h"
#include "model/tokenizer/utf8.h"

namespace fp8kit::tok {
namespace {

// tokenizer.json nests a few levels (Sequence of Sequence at most in practice).
constexpr size_t kMaxJsonDepth = 64;

AddedToken parse_added_token(const Json& j, const std::string& where) {
  AddedToken t;
  const int64_t id = int_field(j, "id", -1, where);
  FP8KIT_CHECK_ARG(id >= 0 && id < kMaxVocabSize, "{}: field 'id' must be an integer in [0, {})", where, kMaxVocabSize);
  t.id = static_cast<int32_t>(id);
  t.content = string_field(j, "content", where);
  t.single_word = bool_field(j, "single_word", false, where);
  t.lstrip = bool_field(j, "lstrip", false, where);
  t.rstrip = bool_field(j, "rstrip", false, where);
  t.special = bool_field(j, "special", false, where);
  t.normalized = bool_field(j, "normalized", !t.special, where);
  return t;
}

void add_tokens(const Json& list, Tokenizer::Impl& impl, const std::string& name) {
  FP8KIT_CHECK_ARG(list.is_array(), "{}: added_tokens must be an array", name);
  const auto model_size = static_cast<int32_t>(impl.model->size());
  int32_t max_added = -1;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string where = fmt::format("{}: added_tokens[{}]", name, i);
    AddedToken t = parse_added_token(list[i], where);
    FP8KIT_CHECK_ARG(!t.content.empty(), "{}: the content is empty", where);
    FP8KIT_CHECK_ARG(!impl.added_by_content.contains(t.content), "{}: token '{}' is added twice", where, t.content);
    // tokenizers ignores the stored id: a token of the vocabulary keeps its id, any other takes
    // the next id after the vocabulary and the added tokens. A file that disagrees is refused
    // rather than given ids that differ from tokenizers' or from the file's.
    const auto in_vocab = impl.model->vocab().find(t.content);
    int32_t expected;
    if (in_vocab != impl.model->vocab().end()) {
      expected = in_vocab->second;
    } else if (max_added < 0) {
      expected = model_size;
    } else {
      expected = max_added >= model_size || model_size == 0 ? max_added + 1 : model_size;
    }
    FP8KIT_CHECK_ARG(t.id == expected, "{}: token '{}' has id {}, but tokenizers gives it id {}", where, t.content, t.id,
                     expected);
    max_added = std::max(max_added, t.id);
    impl.added_by_content.emplace(t.content, t.id);
    impl.added_by_id.emplace(t.id, impl.added_tokens.size());
    impl.added_tokens.push_back(std::move(t));
  }
}

void build_matchers(Tokenizer::Impl& impl) {
  for (AddedToken& t : impl.added_tokens) {
    t.text = t.content;
    if (t.normalized && impl.normalizer) impl.normalizer->normalize(t.text);
  }
  // Special tokens come first in tokenizers' pattern order, then the others, each in file order.
  std::vector<AddedToken> raw, normalized;
  std::vector<std::string> raw_patterns, normalized_patterns;
  for (const bool special : {true, false}) {
    for (const AddedToken& t : impl.added_tokens) {
      if (t.special != special) continue;
      if (t.normalized) {
        normalized.push_back(t);
        normalized_patterns.push_back(t.text);
      } else {
        raw.push_back(t);
        raw_patterns.push_back(t.content);
      }
    }
  }
  if (!raw.empty()) impl.raw_matcher = std::make_unique<AddedTokenMatcher>(std::move(raw), raw_patterns);
  if (!normalized.empty()) {
    impl.normalized_matcher = std::make_unique<AddedTokenMatcher>(std::move(normalized), normalized_patterns);
  }
}

}  // namespace

std::shared_ptr<Tokenizer::Impl> load_tokenizer_json(std::string_view text, const std::string& name) {
  Json j;
  try {
    j = io::parse_json_strict<Json>(text, kMaxJsonDepth, nullptr);
  } catch (const Error& e) {
    throw Error(e.code(), name + ": " + e.what());
  }
  FP8KIT_CHECK_ARG(j.is_object(), "{}: expected a JSON object, got {}", name, io::json_kind(j));
  if (j.contains("version")) {
    FP8KIT_CHECK(j["version"] == "1.0", ErrorCode::kUnsupported, "{}: version {} is not supported (only \"1.0\")", name,
                 io::json_excerpt(j["version"]));
  }
  for (const char* key : {"truncation", "padding"}) {
    FP8KIT_CHECK(!j.contains(key) || j[key].is_null(), ErrorCode::kUnsupported, "{}: {} is not supported (it must be null)",
                 name, key);
  }
  static std::atomic<uint64_t> loads{0};
  auto impl = std::make_shared<Tokenizer::Impl>();
  impl->name = name;
  impl->load_number = ++loads;
  const Json& model = field(j, "model", name);
  // Files without the model's "type" are read by tokenizers as the first model whose fields they
  // have: "vocab" and "merges" make a BPE.
  const bool untyped_bpe = model.is_object() && !model.contains("type") && model.contains("merges");
  const std::string model_type = untyped_bpe ? std::string("BPE") : type_of(model, name + ": model");
  if (model_type != "BPE") unsupported_type(name + ": model", "model", model_type);
  impl->model = std::make_unique<BpeModel>(model, name + ": model");
  const Json null;
  auto part = [&](const char* key) -> const Json& { return j.contains(key) ? j[key] : null; };
  impl->normalizer = make_normalizer(part("normalizer"), name + ": normalizer");
  impl->pre_tokenizer = make_pre_tokenizer(part("pre_tokenizer"), name + ": pre_tokenizer");
  impl->post_processor = make_post_processor(part("post_processor"), name + ": post_processor");
  impl->decoder = make_decoder(part("decoder"), name + ": decoder");
  if (j.contains("added_tokens")) add_tokens(j["added_tokens"], *impl, name);
  build_matchers(*impl);

  int64_t size = 0;
  for (const auto& [token, id] : impl->model->vocab()) size = std::max<int64_t>(size, int64_t{id} + 1);
  for (const AddedToken& t : impl->added_tokens) size = std::max<int64_t>(size, int64_t{t.id} + 1);
  impl->vocab_size = size;
  if (impl->post_processor) {
    // The template's ids, as it adds them to an empty sequence, must be tokens: a model would
    // index its embedding with them.
    std::vector<int32_t> template_ids;
    impl->post_processor->process(template_ids, nullptr);
    for (const int32_t id : template_ids) {
      FP8KIT_CHECK_ARG(impl->token_of(id) != nullptr, "{}: post_processor: token id {} of its template is not in the vocabulary",
                       name, id);
    }
  }
  impl->special.assign(static_cast<size_t>(size), false);
  for (const AddedToken& t : impl->added_tokens) impl->special[t.id] = t.special;
  return impl;
}

}  // namespace fp8kit::tok
