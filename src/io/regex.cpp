// Regex over PCRE2's DFA matcher (see regex.h). Tested in tests/cpu/test_regex.cpp.
#include "io/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <vector>

#include "core/check.h"
#include "core/names.h"

namespace fp8kit::io {
namespace {

constexpr const char* kWhy = "fp8kit matches re: patterns without backtracking, which rules out backreferences and recursion";

std::string pcre2_message(int code) {
  PCRE2_UCHAR message[256];
  pcre2_get_error_message(code, message, sizeof(message));
  return reinterpret_cast<const char*>(message);
}

}  // namespace

struct Regex::Compiled {
  pcre2_code* code = nullptr;
  pcre2_match_context* context = nullptr;
  ~Compiled() {
    pcre2_match_context_free(context);
    pcre2_code_free(code);
  }
};

Regex::Regex(std::string_view pattern, std::string_view what) : pattern_(pattern) {
  auto compiled = std::make_shared<Compiled>();
  int error = 0;
  PCRE2_SIZE offset = 0;
  // UTF-8 and Unicode classes, as Python matches str patterns by code point.
  compiled->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP,
                                 &error, &offset, nullptr);
  FP8KIT_CHECK_ARG(compiled->code != nullptr, "{} {} is not a regular expression fp8kit can match ({} at offset {}); {}",
                   what, quote_name(pattern), pcre2_message(error), offset, kWhy);
  uint32_t backrefs = 0;
  pcre2_pattern_info(compiled->code, PCRE2_INFO_BACKREFMAX, &backrefs);
  FP8KIT_CHECK_ARG(backrefs == 0, "{} {} is not a regular expression fp8kit can match (a backreference); {}", what,
                   quote_name(pattern), kWhy);
  compiled->context = pcre2_match_context_create(nullptr);
  FP8KIT_CHECK(compiled->context != nullptr, ErrorCode::kInternal, "out of memory compiling {} {}", what, quote_name(pattern));
  pcre2_set_match_limit(compiled->context, 10'000'000);
  pcre2_set_depth_limit(compiled->context, 10'000);
  pcre2_set_heap_limit(compiled->context, 64 * 1024);  // KiB
  re_ = std::move(compiled);
}

bool Regex::matches_at_start(std::string_view text) const {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  FP8KIT_CHECK(data != nullptr, ErrorCode::kInternal, "out of memory matching {}", quote_name(pattern_));
  // The DFA matcher keeps its alternatives in a caller's workspace; a pattern that needs more is
  // retried with a larger one, up to a bound.
  int rc = PCRE2_ERROR_DFA_WSSIZE;
  for (size_t size = 256; rc == PCRE2_ERROR_DFA_WSSIZE && size <= (size_t{1} << 20); size *= 8) {
    std::vector<int> workspace(size);
    // DFA_SHORTEST: whether some match starts here is all re.match needs.
    rc = pcre2_dfa_match(re_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0,
                         PCRE2_ANCHORED | PCRE2_DFA_SHORTEST, data, re_->context, workspace.data(),
                         static_cast<PCRE2_SIZE>(workspace.size()));
  }
  pcre2_match_data_free(data);
  if (rc >= 0) return true;  // 0: a match whose offsets did not fit (there is one)
  if (rc == PCRE2_ERROR_NOMATCH || rc == PCRE2_ERROR_PARTIAL) return false;
  fail(ErrorCode::kInvalidArgument, "pattern {} cannot be matched against {}: {}", quote_name(pattern_),
       quote_name(text), pcre2_message(rc));
}

}  // namespace fp8kit::io
