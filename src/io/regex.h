// Regex: the one regular-expression type of fp8kit, for the `re:` patterns of ignore lists that
// come from checkpoints and command lines. PCRE2's DFA matcher underneath: it runs every
// alternative in step instead of backtracking, so matching is polynomial in the input whatever
// the pattern (no catastrophic backtracking), with PCRE2's match and heap limits on top; a
// pattern is compiled once. Matching follows Python's re.match, which vLLM and
// compressed-tensors use: anchored at the start of the name, not at its end. Patterns the DFA
// matcher cannot run (backreferences, recursion) are an error naming the pattern
// (docs/compat.md). Tested in tests/cpu/test_regex.cpp.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace fp8kit::io {

class Regex {
 public:
  // Compiles `pattern`; when it cannot, Error(kInvalidArgument) "<what> '<pattern>' is not a
  // regular expression fp8kit can match (<reason>); ...", what being e.g. "--ignore pattern".
  Regex(std::string_view pattern, std::string_view what);

  // Python's re.match(pattern, text) is not None: a match that starts at the first character.
  // A text that is not UTF-8, or a match past PCRE2's limits, is an Error naming the pattern.
  bool matches_at_start(std::string_view text) const;
  const std::string& pattern() const { return pattern_; }

 private:
  struct Compiled;
  std::string pattern_;
  std::shared_ptr<const Compiled> re_;  // immutable after construction: shared by copies, thread-safe
};

}  // namespace fp8kit::io
