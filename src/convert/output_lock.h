// The lock of one output directory: flock on ".<name>.lock" beside it, held for a whole quantize
// or dequantize run, so that two runs never write one output; the second fails at once. The
// lock file fp8kit creates holds kOutputLockText and is removed on release; a file of that name
// that fp8kit did not create serves as the lock but is never changed or removed.
// Part of OutputDirectory (output_directory.h); tested in tests/cpu/test_output_directory.cpp.
#pragma once

#include <string>

namespace fp8kit::convert {

inline constexpr const char* kOutputLockText = "fp8kit output lock: a quantize or dequantize run writes this output\n";

class OutputLock {
 public:
  // Error(kIo) naming `output` when another process holds the lock, or the file cannot be made.
  OutputLock(std::string lock_path, const std::string& output);
  ~OutputLock();
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

  const std::string& path() const { return path_; }
  // Removes the lock file (if fp8kit's) while the lock is still held: for a process about to
  // _exit, whose destructors do not run. The lock itself goes with the process.
  void remove_file_before_exit();

 private:
  std::string path_;
  int fd_ = -1;
  bool ours_ = false;  // holds kOutputLockText: removed on release
};

}  // namespace fp8kit::convert
