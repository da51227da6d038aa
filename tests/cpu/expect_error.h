// Assertions on fp8kit::Error: the code and the exact message (the spec's texts are part of the
// contract), or the code and a part of the message (messages that embed paths).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <typeinfo>

#include "fp8kit/error.h"

namespace fp8kit::testing {

// Runs `f`, which must throw fp8kit::Error with exactly `code` and `message`.
inline void expect_error(const std::function<void()>& f, ErrorCode code, const std::string& message) {
  try {
    f();
    ADD_FAILURE() << "expected an error: " << message;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_EQ(std::string(e.what()), message);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected fp8kit::Error, got " << typeid(e).name() << ": " << e.what();
  }
}

inline void expect_invalid(const std::function<void()>& f, const std::string& message) {
  expect_error(f, ErrorCode::kInvalidArgument, message);
}

// Runs `f`, which must throw fp8kit::Error with `code` and a message containing `part`.
inline void expect_error_containing(const std::function<void()>& f, ErrorCode code, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "expected an error containing: " << part;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected fp8kit::Error, got " << typeid(e).name() << ": " << e.what();
  }
}

}  // namespace fp8kit::testing
