// PCRE2 regular expressions for the tokenizer's split patterns (UTF mode, Unicode properties, JIT
// compiled). Hugging Face tokenizers runs these patterns with Oniguruma; the pattern syntax of
// the models' pre-tokenizers (\p{L}, \p{N}, \s, lookahead, (?i:...)) means the same in PCRE2,
// and \s is rewritten to Unicode White_Space as Oniguruma defines it.
// Tested in tests/cpu/test_tokenizer_components.cpp and, against tokenizers, tests/python/.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace fp8kit::tok {

class Regex {
 public:
  // Compiles `pattern`; Error(kInvalidArgument) "<where>: invalid regex ...: <reason>".
  Regex(const std::string& pattern, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Calls fn(start, end) for each non-overlapping match in `subject` (valid UTF-8), left to
  // right; after an empty match the search resumes one code point later.
  void find_all(std::string_view subject, const std::function<void(size_t, size_t)>& fn) const;

  // Whether the pattern matches at the start of `subject` (used with anchored patterns).
  bool matches_at_start(std::string_view subject) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct Code;
  std::string pattern_;
  std::unique_ptr<Code> code_;
};

// Escapes `literal` so that it matches itself (a Split or Replace pattern given as a String).
std::string regex_escape(std::string_view literal);

}  // namespace fp8kit::tok
