// Regex over RE2 (see regex.h). Tested in tests/cpu/test_regex.cpp.
#include "io/regex.h"

#include <re2/re2.h>

#include "core/check.h"
#include "core/names.h"

namespace fp8kit::io {

Regex::Regex(std::string_view pattern, std::string_view what) : pattern_(pattern) {
  RE2::Options options;
  options.set_log_errors(false);  // the error goes into the exception, not to stderr
  // UTF-8 (RE2's default), as Python matches str patterns by code point.
  auto re = std::make_shared<const RE2>(re2::StringPiece(pattern.data(), pattern.size()), options);
  FP8KIT_CHECK_ARG(re->ok(),
                   "{} {} is not a regular expression fp8kit can match ({}); fp8kit matches re: patterns with RE2, "
                   "which has no backreferences or lookaround",
                   what, quote_name(pattern), shown_path(re->error()));
  re_ = std::move(re);
}

bool Regex::matches_at_start(std::string_view text) const {
  return re_->Match(re2::StringPiece(text.data(), text.size()), 0, text.size(), RE2::ANCHOR_START, nullptr, 0);
}

}  // namespace fp8kit::io
