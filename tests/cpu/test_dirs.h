// Test helpers: a fresh scratch directory per test, and running the fp8kit binary.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <unistd.h>

namespace fp8kit::testing {

// <tmp>/<suite>.<test>, emptied at construction. <tmp> is $FP8KIT_TEST_TMPDIR when set (the
// GPU tests run on another machine than the one that built them), else the build's tmp folder.
inline std::string scratch_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const char* env = std::getenv("FP8KIT_TEST_TMPDIR");
  const std::string root = env != nullptr && *env != '\0' ? env : FP8KIT_TEST_TMPDIR;
  const std::string dir = root + "/" + info->test_suite_name() + "." + info->name();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// <tmp>/<name>.<pid>, emptied at the first call: a fixture shared by the tests of one process.
// The process id keeps parallel test processes (ctest -j) out of each other's files.
inline std::string process_dir(const std::string& name) {
  const char* env = std::getenv("FP8KIT_TEST_TMPDIR");
  const std::string root = env != nullptr && *env != '\0' ? env : FP8KIT_TEST_TMPDIR;
  const std::string dir = root + "/" + name + "." + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs `fp8kit ARGS` (a shell-quoted argument string), with `env` ("NAME=value ...", shell-quoted)
// added to its environment.
inline CommandResult run_cli(const std::string& args, const std::string& env = "") {
  const std::string command =
      (env.empty() ? "" : "env " + env + " ") + std::string(FP8KIT_CLI_PATH) + " " + args + " 2>&1";
  CommandResult r;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) r.output.append(buffer.data(), n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace fp8kit::testing
