// PCRE2 regular expressions of the tokenizer (see regex.h).
// Tested in tests/cpu/test_tokenizer_components.cpp and tests/python/test_tokenizer_interop.py.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "model/tokenizer/regex.h"

#include <pcre2.h>

#include "core/check.h"
#include "model/tokenizer/utf8.h"

namespace fp8kit::tok {
namespace {

// Oniguruma's \s (what tokenizers' patterns mean) is Unicode White_Space; PCRE2's UCP \s also
// takes U+180E. Writing \s as the property keeps the two engines in step; inside a class the
// property is a valid member too ([^\s\p{L}] -> [^\p{White_Space}\p{L}]).
std::string rewrite_white_space_escapes(const std::string& pattern) {
  std::string out;
  out.reserve(pattern.size() + 32);
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[i + 1];
      if (next == 's') {
        out += "\\p{White_Space}";
      } else if (next == 'S') {
        out += "\\P{White_Space}";
      } else {
        out += pattern[i];
        out += next;
      }
      ++i;
      continue;
    }
    out += pattern[i];
  }
  return out;
}

struct MatchData {
  pcre2_match_data* data = nullptr;
  ~MatchData() { pcre2_match_data_free(data); }
};

}  // namespace

struct Regex::Code {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Code() { pcre2_code_free(code); }
};

Regex::Regex(const std::string& pattern, const std::string& where) : pattern_(pattern), code_(new Code) {
  const std::string rewritten = rewrite_white_space_escapes(pattern);
  int error = 0;
  PCRE2_SIZE offset = 0;
  code_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(rewritten.data()), rewritten.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &error, &offset, nullptr);
  if (code_->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    fail(ErrorCode::kInvalidArgument, "{}: invalid regex '{}': {} at offset {}", where, pattern,
         reinterpret_cast<const char*>(message), offset);
  }
  code_->jit = pcre2_jit_compile(code_->code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() = default;

void Regex::find_all(std::string_view subject, const std::function<void(size_t, size_t)>& fn) const {
  // One match block per thread (pcre2_match_data is not thread-safe); only the whole match is
  // read, so a pattern with more groups than it holds still reports it (rc 0).
  thread_local MatchData match;
  if (match.data == nullptr) match.data = pcre2_match_data_create(8, nullptr);
  const auto* s = reinterpret_cast<PCRE2_SPTR>(subject.data());
  size_t start = 0;
  while (start <= subject.size()) {
    const int rc = code_->jit ? pcre2_jit_match(code_->code, s, subject.size(), start, 0, match.data, nullptr)
                              : pcre2_match(code_->code, s, subject.size(), start, PCRE2_NO_UTF_CHECK, match.data, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) return;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof(message));
      fail(ErrorCode::kInvalidArgument, "regex '{}': matching failed: {}", pattern_, reinterpret_cast<const char*>(message));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match.data);
    const size_t b = ov[0], e = ov[1];
    fn(b, e);
    if (e > b) {
      start = e;
    } else if (e >= subject.size()) {
      return;
    } else {
      start = e + utf8_length(static_cast<unsigned char>(subject[e]));
    }
  }
}

bool Regex::matches_at_start(std::string_view subject) const {
  thread_local MatchData match;
  if (match.data == nullptr) match.data = pcre2_match_data_create(8, nullptr);
  const int rc = pcre2_match(code_->code, reinterpret_cast<PCRE2_SPTR>(subject.data()), subject.size(), 0,
                             PCRE2_ANCHORED | PCRE2_NO_UTF_CHECK, match.data, nullptr);
  return rc >= 0;
}

std::string regex_escape(std::string_view literal) {
  std::string out;
  for (const char c : literal) {
    if (std::string_view("\\^$.|?*+()[]{}-/#").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

}  // namespace fp8kit::tok
