// Helpers of the io tests: fresh scratch directories, raw byte files (to assemble hostile
// safetensors files by hand) and capture of the message of an expected fp8kit::Error.
// Used by tests/cpu/test_safetensors*.cpp and tests/cpu/test_checkpoint.cpp.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>

#include "fp8kit/error.h"

namespace fp8kit::testing {

// FP8KIT_TEST_TMPDIR/io/<name>, emptied and created.
inline std::string fresh_dir(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::path(FP8KIT_TEST_TMPDIR) / "io" / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

inline void write_bytes(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline std::string le64(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s;
}

// A safetensors file: the length of `header` as u64 LE, `header`, then `data`.
inline std::string safetensors_bytes(std::string_view header, std::string_view data = {}) {
  return le64(header.size()) + std::string(header) + std::string(data);
}

inline bool exists(const std::string& path) { return std::filesystem::exists(path); }

// Runs `f`, which must throw fp8kit::Error with `code`; returns its message ("" on failure).
template <typename F>
std::string error_message(F&& f, ErrorCode code = ErrorCode::kIo) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected fp8kit::Error, got another exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected fp8kit::Error, nothing was thrown";
  return "";
}

}  // namespace fp8kit::testing
