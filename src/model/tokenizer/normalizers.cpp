// Normalizers of tokenizer.json: Sequence, NFC, NFD, NFKC, NFKD (utf8proc), Prepend, Replace,
// Strip. Reference: huggingface/tokenizers tokenizers/src/normalizers/{unicode,prepend,replace,
// strip,utils}.rs. Tested in tests/cpu/test_tokenizer_components.cpp and tests/python/.
#include <utf8proc.h>

#include <cstdlib>

#include "core/check.h"
#include "model/tokenizer/json_fields.h"
#include "model/tokenizer/pipeline.h"
#include "model/tokenizer/regex.h"
#include "model/tokenizer/utf8.h"

namespace fp8kit::tok {
namespace {

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> parts) : parts_(std::move(parts)) {}
  void normalize(std::string& text) const override {
    for (const auto& p : parts_) p->normalize(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

class UnicodeNormalizer final : public Normalizer {
 public:
  explicit UnicodeNormalizer(int options) : options_(options) {}
  void normalize(std::string& text) const override {
    if (text.empty()) return;
    // ASCII is invariant under every normalization form.
    bool ascii = true;
    for (const char c : text) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
    if (ascii) return;
    utf8proc_uint8_t* out = nullptr;
    const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                            static_cast<utf8proc_ssize_t>(text.size()), &out,
                                            static_cast<utf8proc_option_t>(options_));
    FP8KIT_CHECK(n >= 0, ErrorCode::kInvalidArgument, "unicode normalization failed: {}", utf8proc_errmsg(n));
    text.assign(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
    std::free(out);
  }

 private:
  int options_;
};

class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string& text) const override {
    if (!text.empty()) text.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(const std::string& pattern, bool is_regex, std::string content, const std::string& where)
      : literal_(is_regex ? std::string() : pattern), content_(std::move(content)) {
    if (is_regex) regex_ = std::make_unique<Regex>(pattern, where);
    FP8KIT_CHECK_ARG(is_regex || !literal_.empty(), "{}: the Replace pattern is empty", where);
  }
  void normalize(std::string& text) const override {
    std::string out;
    size_t last = 0;
    auto replace = [&](size_t b, size_t e) {
      out.append(text, last, b - last);
      out += content_;
      last = e;
    };
    if (regex_) {
      regex_->find_all(text, [&](size_t b, size_t e) {
        if (e > b) replace(b, e);
      });
    } else {
      for (size_t pos = text.find(literal_); pos != std::string::npos; pos = text.find(literal_, last)) {
        replace(pos, pos + literal_.size());
      }
    }
    if (last == 0 && out.empty()) return;
    out.append(text, last, std::string::npos);
    text = std::move(out);
  }

 private:
  std::string literal_;
  std::unique_ptr<Regex> regex_;
  std::string content_;
};

class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& text) const override {
    size_t begin = 0, end = text.size();
    if (left_) {
      while (begin < end) {
        size_t i = begin;
        if (!is_white_space(next_code_point(text, i))) break;
        begin = i;
      }
    }
    if (right_) {
      while (end > begin) {
        size_t start = end - 1;
        while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
        size_t i = start;
        if (!is_white_space(next_code_point(text, i))) break;
        end = start;
      }
    }
    text = text.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const Json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  const std::string type = type_of(j, where);
  if (type == "Sequence") {
    const Json& list = field(j, "normalizers", where);
    FP8KIT_CHECK_ARG(list.is_array(), "{}: field 'normalizers' must be an array", where);
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (size_t i = 0; i < list.size(); ++i) {
      auto n = make_normalizer(list[i], fmt::format("{}.normalizers[{}]", where, i));
      FP8KIT_CHECK_ARG(n != nullptr, "{}.normalizers[{}]: null is not a normalizer", where, i);
      parts.push_back(std::move(n));
    }
    return std::make_unique<SequenceNormalizer>(std::move(parts));
  }
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(UTF8PROC_STABLE | UTF8PROC_COMPOSE);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
  if (type == "Prepend") return std::make_unique<PrependNormalizer>(string_field(j, "prepend", where));
  if (type == "Replace") {
    const auto [pattern, is_regex] = pattern_field(j, where);
    return std::make_unique<ReplaceNormalizer>(pattern, is_regex, string_field(j, "content", where), where);
  }
  if (type == "Strip") {
    return std::make_unique<StripNormalizer>(bool_field(j, "strip_left", false, where),
                                             bool_field(j, "strip_right", false, where));
  }
  unsupported_type(where, "normalizer", type);
}

}  // namespace fp8kit::tok
