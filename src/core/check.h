// Internal helpers to raise fp8kit::Error with formatted messages. Not a public header.
#pragma once

#include <fmt/format.h>

#include "fp8kit/error.h"

namespace fp8kit {

template <typename... Args>
[[noreturn]] void fail(ErrorCode code, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(code, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace fp8kit

// FP8KIT_CHECK(cond, code, "format {}", args...): throws fp8kit::Error when cond is false.
#define FP8KIT_CHECK(cond, code, ...)                 \
  do {                                                \
    if (!(cond)) ::fp8kit::fail((code), __VA_ARGS__); \
  } while (0)

#define FP8KIT_CHECK_ARG(cond, ...) FP8KIT_CHECK(cond, ::fp8kit::ErrorCode::kInvalidArgument, __VA_ARGS__)
