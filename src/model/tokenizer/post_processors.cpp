// Post-processors of tokenizer.json for one sequence: TemplateProcessing (BOS/EOS templates),
// BertProcessing and RobertaProcessing ([CLS] A [SEP] / <s> A </s>), ByteLevel (offsets only:
// no change to ids) and Sequence. Reference: tokenizers/src/processors/{template,bert,roberta,
// sequence}.rs. Tested in tests/cpu/test_tokenizer_components.cpp and tests/python/.
#include "core/check.h"
#include "io/json_util.h"
#include "model/tokenizer/json_fields.h"
#include "model/tokenizer/pipeline.h"

namespace fp8kit::tok {
namespace {

// The ids of a single sequence: `before`, the sequence, `after`.
class WrapProcessor final : public PostProcessor {
 public:
  struct Part {
    std::vector<int32_t> ids;
    std::vector<std::string> tokens;
  };
  WrapProcessor(Part before, Part after) : before_(std::move(before)), after_(std::move(after)) {}
  void process(std::vector<int32_t>& ids, std::vector<std::string>* tokens) const override {
    ids.insert(ids.begin(), before_.ids.begin(), before_.ids.end());
    ids.insert(ids.end(), after_.ids.begin(), after_.ids.end());
    if (tokens == nullptr) return;
    tokens->insert(tokens->begin(), before_.tokens.begin(), before_.tokens.end());
    tokens->insert(tokens->end(), after_.tokens.begin(), after_.tokens.end());
  }

 private:
  Part before_, after_;
};

class NoOpProcessor final : public PostProcessor {
 public:
  void process(std::vector<int32_t>&, std::vector<std::string>*) const override {}
};

class SequenceProcessor final : public PostProcessor {
 public:
  explicit SequenceProcessor(std::vector<std::unique_ptr<PostProcessor>> parts) : parts_(std::move(parts)) {}
  void process(std::vector<int32_t>& ids, std::vector<std::string>* tokens) const override {
    for (const auto& p : parts_) p->process(ids, tokens);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> parts_;
};

std::unique_ptr<PostProcessor> make_template(const Json& j, const std::string& where) {
  const Json& single = field(j, "single", where);
  const Json& specials = field(j, "special_tokens", where);
  FP8KIT_CHECK_ARG(single.is_array(), "{}: field 'single' must be an array", where);
  FP8KIT_CHECK_ARG(specials.is_object(), "{}: field 'special_tokens' must be an object", where);
  WrapProcessor::Part before, after;
  bool seen_sequence = false;
  for (size_t i = 0; i < single.size(); ++i) {
    const std::string item = fmt::format("{}.single[{}]", where, i);
    const Json& piece = single[i];
    FP8KIT_CHECK_ARG(piece.is_object() && piece.size() == 1, "{}: expected {{\"SpecialToken\": ...}} or {{\"Sequence\": ...}}",
                     item);
    if (piece.contains("Sequence")) {
      const std::string id = string_field(piece["Sequence"], "id", item + ".Sequence");
      FP8KIT_CHECK_ARG(id == "A", "{}: a single-sequence template can only hold sequence A, got '{}'", item, id);
      FP8KIT_CHECK_ARG(!seen_sequence, "{}: sequence A appears twice", item);
      seen_sequence = true;
      continue;
    }
    FP8KIT_CHECK_ARG(piece.contains("SpecialToken"), "{}: expected {{\"SpecialToken\": ...}} or {{\"Sequence\": ...}}", item);
    const std::string name = string_field(piece["SpecialToken"], "id", item + ".SpecialToken");
    const auto it = specials.find(name);
    FP8KIT_CHECK_ARG(it != specials.end(), "{}: special token '{}' is not in special_tokens", item, name);
    const std::string special = where + ".special_tokens." + name;
    const Json& ids = field(*it, "ids", special);
    const Json& tokens = field(*it, "tokens", special);
    FP8KIT_CHECK_ARG(ids.is_array() && tokens.is_array() && ids.size() == tokens.size(),
                     "{}: 'ids' and 'tokens' must be arrays of one length", special);
    WrapProcessor::Part& part = seen_sequence ? after : before;
    for (size_t k = 0; k < ids.size(); ++k) {
      FP8KIT_CHECK_ARG(ids[k].is_number_integer() && ids[k].get<int64_t>() >= 0 && ids[k].get<int64_t>() <= INT32_MAX,
                       "{}: id {} is not a token id", special, io::json_excerpt(ids[k]));
      FP8KIT_CHECK_ARG(tokens[k].is_string(), "{}: token {} is not a string", special, io::json_excerpt(tokens[k]));
      part.ids.push_back(static_cast<int32_t>(ids[k].get<int64_t>()));
      part.tokens.push_back(tokens[k].get<std::string>());
    }
  }
  FP8KIT_CHECK_ARG(seen_sequence, "{}: the single template has no sequence A", where);
  return std::make_unique<WrapProcessor>(std::move(before), std::move(after));
}

// BertProcessing / RobertaProcessing: "cls": ["[CLS]", 101], "sep": ["[SEP]", 102].
WrapProcessor::Part token_pair(const Json& j, const char* name, const std::string& where) {
  const Json& pair = field(j, name, where);
  FP8KIT_CHECK_ARG(pair.is_array() && pair.size() == 2 && pair[0].is_string() && pair[1].is_number_integer() &&
                       pair[1].get<int64_t>() >= 0 && pair[1].get<int64_t>() <= INT32_MAX,
                   "{}: field '{}' must be [token, id]", where, name);
  return {{static_cast<int32_t>(pair[1].get<int64_t>())}, {pair[0].get<std::string>()}};
}

}  // namespace

std::unique_ptr<PostProcessor> make_post_processor(const Json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  const std::string type = type_of(j, where);
  if (type == "TemplateProcessing") return make_template(j, where);
  if (type == "ByteLevel") return std::make_unique<NoOpProcessor>();
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    return std::make_unique<WrapProcessor>(token_pair(j, "cls", where), token_pair(j, "sep", where));
  }
  if (type == "Sequence") {
    const Json& list = field(j, "processors", where);
    FP8KIT_CHECK_ARG(list.is_array(), "{}: field 'processors' must be an array", where);
    std::vector<std::unique_ptr<PostProcessor>> parts;
    for (size_t i = 0; i < list.size(); ++i) {
      auto p = make_post_processor(list[i], fmt::format("{}.processors[{}]", where, i));
      FP8KIT_CHECK_ARG(p != nullptr, "{}.processors[{}]: null is not a post-processor", where, i);
      parts.push_back(std::move(p));
    }
    return std::make_unique<SequenceProcessor>(std::move(parts));
  }
  unsupported_type(where, "post-processor", type);
}

}  // namespace fp8kit::tok
