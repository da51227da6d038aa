// tokenizer_config.json (transformers' file next to tokenizer.json): bos_token and eos_token
// (a string or an AddedToken object with "content") and chat_template (a string, or a list of
// {name, template} where "default" is used). Tested in tests/cpu/test_tokenizer.cpp.
#include "core/check.h"
#include "io/json_util.h"
#include "model/tokenizer/json_fields.h"
#include "model/tokenizer/tokenizer_impl.h"

namespace fp8kit::tok {
namespace {

constexpr size_t kMaxConfigBytes = 64u << 20;

std::optional<int32_t> special_token_id(const Json& j, const char* key, const Tokenizer::Impl& impl,
                                        const std::string& path) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  std::string content;
  if (it->is_string()) {
    content = it->get<std::string>();
  } else {
    content = string_field(*it, "content", fmt::format("{}: {}", path, key));
  }
  const auto found = impl.added_by_content.find(content);
  if (found != impl.added_by_content.end()) return found->second;
  const auto in_vocab = impl.model->vocab().find(content);
  FP8KIT_CHECK_ARG(in_vocab != impl.model->vocab().end(), "{}: {} '{}' is not in the tokenizer's vocabulary", path, key,
                   content);
  return in_vocab->second;
}

}  // namespace

void load_tokenizer_config(const std::string& path, Tokenizer::Impl& impl) {
  const std::string text = read_regular_file(path, kMaxConfigBytes);
  Json j;
  try {
    j = io::parse_json_strict<Json>(text, 64, nullptr);
  } catch (const Error& e) {
    throw Error(e.code(), path + ": " + e.what());
  }
  FP8KIT_CHECK_ARG(j.is_object(), "{}: expected a JSON object, got {}", path, io::json_kind(j));
  impl.bos_id = special_token_id(j, "bos_token", impl, path);
  impl.eos_id = special_token_id(j, "eos_token", impl, path);
  const auto it = j.find("chat_template");
  if (it == j.end() || it->is_null()) return;
  if (it->is_string()) {
    impl.chat_template = it->get<std::string>();
    return;
  }
  FP8KIT_CHECK_ARG(it->is_array(), "{}: chat_template must be a string or a list of {{name, template}}", path);
  for (const Json& named : *it) {
    if (string_field(named, "name", path + ": chat_template") == "default") {
      impl.chat_template = string_field(named, "template", path + ": chat_template");
    }
  }
}

}  // namespace fp8kit::tok
