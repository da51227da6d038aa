// Pre-tokenizers of tokenizer.json: Sequence, Split, ByteLevel, Metaspace, Digits.
// Reference: tokenizers/src/pre_tokenizers/{sequence,split,byte_level,metaspace,digits}.rs.
// Tested in tests/cpu/test_tokenizer_components.cpp and tests/python/test_tokenizer_interop.py.
#include "core/check.h"
#include "model/tokenizer/byte_level.h"
#include "model/tokenizer/json_fields.h"
#include "model/tokenizer/pipeline.h"
#include "model/tokenizer/split.h"
#include "model/tokenizer/utf8.h"

namespace fp8kit::tok {
namespace {

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> parts) : parts_(std::move(parts)) {}
  void pre_tokenize(std::vector<Word>& words) const override {
    for (const auto& p : parts_) p->pre_tokenize(words);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

// Applies `split_one(word, out)` to every word.
template <typename F>
void split_each(std::vector<Word>& words, F&& split_one) {
  std::vector<Word> out;
  out.reserve(words.size() * 2);
  for (const Word& w : words) split_one(w, out);
  words = std::move(out);
}

class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(const std::string& pattern, bool is_regex, SplitBehavior behavior, bool invert,
                    const std::string& where)
      : regex_(is_regex ? pattern : regex_escape(pattern), where), behavior_(behavior), invert_(invert) {}
  void pre_tokenize(std::vector<Word>& words) const override {
    split_each(words, [&](const Word& w, std::vector<Word>& out) {
      split_segments(w, regex_segments(regex_, w.text), behavior_, invert_, out);
    });
  }

 private:
  Regex regex_;
  SplitBehavior behavior_;
  bool invert_;
};

class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space), regex_(use_regex ? std::make_unique<Regex>(kGpt2SplitPattern, "ByteLevel") : nullptr) {}
  void pre_tokenize(std::vector<Word>& words) const override {
    std::vector<Word> split;
    split.reserve(words.size());
    for (Word& w : words) {
      if (add_prefix_space_ && (w.text.empty() || w.text[0] != ' ')) w.text.insert(0, " ");
      if (regex_) {
        split_segments(w, regex_segments(*regex_, w.text), SplitBehavior::kIsolated, false, split);
      } else if (!w.text.empty()) {
        split.push_back(std::move(w));
      }
    }
    for (Word& w : split) {
      std::string mapped;
      mapped.reserve(w.text.size() * 2);
      byte_level_encode(w.text, mapped);
      w.text = std::move(mapped);
    }
    words = std::move(split);
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> regex_;
};

enum class PrependScheme { kAlways, kFirst, kNever };

class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  MetaspacePreTokenizer(std::string replacement, PrependScheme scheme, bool split)
      : replacement_(std::move(replacement)), scheme_(scheme), split_(split) {}
  void pre_tokenize(std::vector<Word>& words) const override {
    split_each(words, [&](const Word& w, std::vector<Word>& out) {
      Word r{std::string(), w.at_text_start};
      r.text.reserve(w.text.size() + replacement_.size());
      for (const char c : w.text) {
        if (c == ' ') {
          r.text += replacement_;
        } else {
          r.text += c;
        }
      }
      const bool starts = r.text.compare(0, replacement_.size(), replacement_) == 0;
      if (!starts && (scheme_ == PrependScheme::kAlways || (scheme_ == PrependScheme::kFirst && w.at_text_start))) {
        r.text.insert(0, replacement_);
      }
      if (!split_) {
        if (!r.text.empty()) out.push_back(std::move(r));
        return;
      }
      // Every replacement character is a match of its own, merged with the text after it.
      std::vector<Segment> segments;
      size_t prev = 0;
      for (size_t pos = r.text.find(replacement_); pos != std::string::npos; pos = r.text.find(replacement_, prev)) {
        if (pos != prev) segments.push_back({prev, pos, false});
        segments.push_back({pos, pos + replacement_.size(), true});
        prev = pos + replacement_.size();
      }
      if (prev != r.text.size() || segments.empty()) segments.push_back({prev, r.text.size(), false});
      split_segments(r, std::move(segments), SplitBehavior::kMergedWithNext, false, out);
    });
  }

 private:
  std::string replacement_;
  PrependScheme scheme_;
  bool split_;
};

class DigitsPreTokenizer final : public PreTokenizer {
 public:
  // Rust's char::is_numeric is the general category N (Nd, Nl, No); one match per character.
  explicit DigitsPreTokenizer(bool individual) : regex_("\\p{N}", "Digits"), individual_(individual) {}
  void pre_tokenize(std::vector<Word>& words) const override {
    split_each(words, [&](const Word& w, std::vector<Word>& out) {
      split_segments(w, regex_segments(regex_, w.text),
                     individual_ ? SplitBehavior::kIsolated : SplitBehavior::kContiguous, false, out);
    });
  }

 private:
  Regex regex_;
  bool individual_;
};

PrependScheme metaspace_prepend_scheme(const Json& j, const std::string& where) {
  const auto it = j.find("prepend_scheme");
  if (it == j.end() || it->is_null()) {
    // Files written before prepend_scheme existed say add_prefix_space.
    return bool_field(j, "add_prefix_space", true, where) ? PrependScheme::kAlways : PrependScheme::kNever;
  }
  const std::string s = string_field(j, "prepend_scheme", where);
  if (s == "always") return PrependScheme::kAlways;
  if (s == "first") return PrependScheme::kFirst;
  if (s == "never") return PrependScheme::kNever;
  fail(ErrorCode::kUnsupported, "{}: Metaspace prepend_scheme '{}' is not supported", where, s);
}

std::string single_char_field(const Json& j, const char* name, const std::string& where) {
  const std::string s = string_field(j, name, where);
  FP8KIT_CHECK_ARG(!s.empty() && find_invalid_utf8(s) == std::string::npos && utf8_length(static_cast<unsigned char>(s[0])) == s.size(),
                   "{}: field '{}' must be one character, got '{}'", where, name, s);
  return s;
}

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  const std::string type = type_of(j, where);
  if (type == "Sequence") {
    const Json& list = field(j, "pretokenizers", where);
    FP8KIT_CHECK_ARG(list.is_array(), "{}: field 'pretokenizers' must be an array", where);
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (size_t i = 0; i < list.size(); ++i) {
      auto p = make_pre_tokenizer(list[i], fmt::format("{}.pretokenizers[{}]", where, i));
      FP8KIT_CHECK_ARG(p != nullptr, "{}.pretokenizers[{}]: null is not a pre-tokenizer", where, i);
      parts.push_back(std::move(p));
    }
    return std::make_unique<SequencePreTokenizer>(std::move(parts));
  }
  if (type == "Split") {
    const auto [pattern, is_regex] = pattern_field(j, where);
    return std::make_unique<SplitPreTokenizer>(pattern, is_regex,
                                               parse_split_behavior(string_field(j, "behavior", where), where),
                                               bool_field(j, "invert", false, where), where);
  }
  if (type == "ByteLevel") {
    return std::make_unique<ByteLevelPreTokenizer>(bool_field(j, "add_prefix_space", true, where),
                                                   bool_field(j, "use_regex", true, where));
  }
  if (type == "Metaspace") {
    return std::make_unique<MetaspacePreTokenizer>(single_char_field(j, "replacement", where),
                                                   metaspace_prepend_scheme(j, where), bool_field(j, "split", true, where));
  }
  if (type == "Digits") return std::make_unique<DigitsPreTokenizer>(bool_field(j, "individual_digits", false, where));
  unsupported_type(where, "pre-tokenizer", type);
}

}  // namespace fp8kit::tok
