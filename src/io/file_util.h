// POSIX file helpers shared by the io layer: errno messages, complete reads and writes, and the
// temporary-name + fsync + rename dance that makes every output file appear atomically.
// Exercised through tests/cpu/test_safetensors*.cpp and tests/cpu/test_checkpoint.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace fp8kit::io {

// strerror(errno) as a std::string (thread-safe).
std::string errno_text(int err);

// "<path>.tmp.<pid>": the name an output has until it is complete.
std::string temp_path_for(const std::string& path);

// Reads a whole JSON file: a regular file of at most kMaxJsonFileBytes (io/checkpoint_files.h).
// Error(kIo) naming the file.
std::string read_json_text(const std::string& path);

// Writes all `size` bytes at `offset` (retrying short writes and EINTR). Error(kIo) naming `path`.
void pwrite_all(int fd, const void* data, size_t size, uint64_t offset, const std::string& path);

// fsync of the directory holding `path`, so that a rename into it survives a crash.
void fsync_parent_dir(const std::string& path);
// fsync of the directory `dir` itself.
void fsync_dir(const std::string& dir);

// Writes `text` to the temporary name, fsyncs, renames it over `path`, fsyncs the directory.
// On failure nothing is left under either name.
void write_file_atomic(const std::string& path, std::string_view text);

}  // namespace fp8kit::io
