// Regex: the one regular-expression type of fp8kit, for the `re:` patterns of ignore lists that
// come from checkpoints and command lines. RE2 underneath: matching is linear in the input
// whatever the pattern (no catastrophic backtracking), a pattern is compiled once, and RE2's
// memory per pattern is bounded. Matching follows Python's re.match, which vLLM and
// compressed-tensors use: anchored at the start of the name, not at its end. Patterns RE2 cannot
// compile (backreferences, lookaround) are an error naming the pattern (docs/compat.md).
// Tested in tests/cpu/test_regex.cpp.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace re2 {
class RE2;
}

namespace fp8kit::io {

class Regex {
 public:
  // Compiles `pattern`; when it cannot, Error(kInvalidArgument) "<what> '<pattern>' is not a
  // regular expression fp8kit can match (<RE2's reason>); ...", what being e.g. "--ignore pattern".
  Regex(std::string_view pattern, std::string_view what);

  // Python's re.match(pattern, text) is not None: a match that starts at the first character.
  bool matches_at_start(std::string_view text) const;
  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  std::shared_ptr<const re2::RE2> re_;  // immutable after construction: shared by copies, thread-safe
};

}  // namespace fp8kit::io
