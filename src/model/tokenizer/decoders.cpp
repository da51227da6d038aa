// Decoders of tokenizer.json: ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, Sequence.
// Reference: tokenizers/src/decoders/{byte_fallback,fuse,strip,sequence}.rs,
// pre_tokenizers/{byte_level,metaspace}.rs and normalizers/replace.rs (their decode_chain).
// Tested in tests/cpu/test_tokenizer_components.cpp and tests/python/test_tokenizer_interop.py.
#include "core/check.h"
#include "model/tokenizer/byte_level.h"
#include "model/tokenizer/json_fields.h"
#include "model/tokenizer/pipeline.h"
#include "model/tokenizer/regex.h"
#include "model/tokenizer/utf8.h"

namespace fp8kit::tok {
namespace {

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> parts) : parts_(std::move(parts)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& p : parts_) p->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

// All tokens become one string: their bytes (a token outside the alphabet keeps its own UTF-8),
// read as UTF-8 with invalid sequences replaced.
class ByteLevelDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const std::string& t : tokens) {
      if (!byte_level_decode(t, bytes)) bytes += t;
    }
    tokens.assign(1, utf8_lossy(bytes));
  }
};

class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool strip_first) : replacement_(std::move(replacement)), strip_first_(strip_first) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      const std::string& t = tokens[i];
      size_t pos = 0;
      for (size_t hit = t.find(replacement_); hit != std::string::npos; hit = t.find(replacement_, pos)) {
        out.append(t, pos, hit - pos);
        // tokenizers drops every replacement of the first token (not only the prefix it added).
        if (!(strip_first_ && i == 0)) out += ' ';
        pos = hit + replacement_.size();
      }
      out.append(t, pos, std::string::npos);
      tokens[i] = std::move(out);
    }
  }

 private:
  std::string replacement_;
  bool strip_first_;
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(const std::string& pattern, bool is_regex, std::string content, const std::string& where)
      : regex_(is_regex ? pattern : regex_escape(pattern), where), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      std::string out;
      size_t last = 0;
      regex_.find_all(t, [&](size_t b, size_t e) {
        if (e == b) return;
        out.append(t, last, b - last);
        out += content_;
        last = e;
      });
      out.append(t, last, std::string::npos);
      t = std::move(out);
    }
  }

 private:
  Regex regex_;
  std::string content_;
};

// Runs of <0xNN> tokens become the text of their bytes, or one U+FFFD per byte when the run is
// not valid UTF-8.
class ByteFallbackDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string bytes;
    size_t run = 0;
    auto flush = [&] {
      if (run == 0) return;
      if (find_invalid_utf8(bytes) == std::string::npos) {
        out.push_back(bytes);
      } else {
        for (size_t k = 0; k < run; ++k) out.emplace_back(kReplacementChar);
      }
      bytes.clear();
      run = 0;
    };
    for (std::string& t : tokens) {
      int value = -1;
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>') value = hex_byte(t[3], t[4]);
      if (value >= 0) {
        bytes += static_cast<char>(value);
        ++run;
        continue;
      }
      flush();
      out.push_back(std::move(t));
    }
    flush();
    tokens = std::move(out);
  }

 private:
  static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  static int hex_byte(char hi, char lo) {
    const int h = hex_digit(hi), l = hex_digit(lo);
    return h < 0 || l < 0 ? -1 : h * 16 + l;
  }
};

class FuseDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const std::string& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

// Removes up to `start` leading and `stop` trailing copies of one character from each token.
class StripDecoder final : public Decoder {
 public:
  StripDecoder(std::string content, int64_t start, int64_t stop) : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    const size_t n = content_.size();
    for (std::string& t : tokens) {
      size_t begin = 0, end = t.size();
      for (int64_t k = 0; k < start_ && end - begin >= n && t.compare(begin, n, content_) == 0; ++k) begin += n;
      for (int64_t k = 0; k < stop_ && end - begin >= n && t.compare(end - n, n, content_) == 0; ++k) end -= n;
      t = t.substr(begin, end - begin);
    }
  }

 private:
  std::string content_;
  int64_t start_, stop_;
};

std::string one_char(const Json& j, const char* name, const std::string& where) {
  const std::string s = string_field(j, name, where);
  FP8KIT_CHECK_ARG(!s.empty() && find_invalid_utf8(s) == std::string::npos && utf8_length(static_cast<unsigned char>(s[0])) == s.size(),
                   "{}: field '{}' must be one character, got '{}'", where, name, s);
  return s;
}

}  // namespace

std::unique_ptr<Decoder> make_decoder(const Json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  const std::string type = type_of(j, where);
  if (type == "Sequence") {
    const Json& list = field(j, "decoders", where);
    FP8KIT_CHECK_ARG(list.is_array(), "{}: field 'decoders' must be an array", where);
    std::vector<std::unique_ptr<Decoder>> parts;
    for (size_t i = 0; i < list.size(); ++i) {
      auto d = make_decoder(list[i], fmt::format("{}.decoders[{}]", where, i));
      FP8KIT_CHECK_ARG(d != nullptr, "{}.decoders[{}]: null is not a decoder", where, i);
      parts.push_back(std::move(d));
    }
    return std::make_unique<SequenceDecoder>(std::move(parts));
  }
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Metaspace") {
    bool strip_first = true;
    const auto it = j.find("prepend_scheme");
    if (it != j.end() && !it->is_null()) {
      strip_first = string_field(j, "prepend_scheme", where) != "never";
    } else {
      strip_first = bool_field(j, "add_prefix_space", true, where);
    }
    return std::make_unique<MetaspaceDecoder>(one_char(j, "replacement", where), strip_first);
  }
  if (type == "Replace") {
    const auto [pattern, is_regex] = pattern_field(j, where);
    return std::make_unique<ReplaceDecoder>(pattern, is_regex, string_field(j, "content", where), where);
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    const int64_t start = int_field(j, "start", 0, where), stop = int_field(j, "stop", 0, where);
    FP8KIT_CHECK_ARG(start >= 0 && stop >= 0, "{}: start and stop must not be negative", where);
    return std::make_unique<StripDecoder>(one_char(j, "content", where), start, stop);
  }
  unsupported_type(where, "decoder", type);
}

}  // namespace fp8kit::tok
