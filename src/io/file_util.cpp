// POSIX file helpers of the io layer (see file_util.h).
// Exercised through tests/cpu/test_safetensors*.cpp and tests/cpu/test_checkpoint.cpp.
#include "io/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/check.h"
#include "core/names.h"
#include "io/checkpoint_files.h"

namespace fp8kit::io {

std::string errno_text(int err) {
  char buf[256];
  // GNU strerror_r may return a static string instead of filling buf.
  return ::strerror_r(err, buf, sizeof(buf));
}

std::string temp_path_for(const std::string& path) { return fmt::format("{}.tmp.{}", path, ::getpid()); }

std::string read_json_text(const std::string& path) {
  return open_regular_file(path, kMaxJsonFileBytes, "a JSON file").read_all(kMaxJsonFileBytes);
}

void pwrite_all(int fd, const void* data, size_t size, uint64_t offset, const std::string& path) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (size > 0) {
    const ssize_t n = ::pwrite(fd, p, size, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(ErrorCode::kIo, "{}: cannot write {} bytes at offset {}: {}", shown_path(path), size, offset,
           errno_text(errno));
    }
    p += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
}

void fsync_parent_dir(const std::string& path) {
  const std::string parent = std::filesystem::path(path).parent_path().string();
  fsync_dir(parent.empty() ? std::string(".") : parent);
}

void fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  FP8KIT_CHECK(fd >= 0, ErrorCode::kIo, "{}: cannot open directory: {}", shown_path(dir), errno_text(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  // Some file systems cannot fsync a directory; the rename has happened either way.
  FP8KIT_CHECK(rc == 0 || err == EINVAL || err == EROFS, ErrorCode::kIo, "{}: cannot fsync directory: {}",
               shown_path(dir), errno_text(err));
}

void write_file_atomic(const std::string& path, std::string_view text) {
  const std::string tmp = temp_path_for(path);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  FP8KIT_CHECK(fd >= 0, ErrorCode::kIo, "{}: cannot create: {}", shown_path(tmp), errno_text(errno));
  try {
    pwrite_all(fd, text.data(), text.size(), 0, tmp);
    FP8KIT_CHECK(::fsync(fd) == 0, ErrorCode::kIo, "{}: cannot fsync: {}", shown_path(tmp), errno_text(errno));
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  // Linux releases the descriptor even when close() fails, so it is never closed twice.
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail(ErrorCode::kIo, "{}: cannot close: {}", shown_path(tmp), errno_text(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail(ErrorCode::kIo, "{}: cannot rename {} to it: {}", shown_path(path), shown_path(tmp), errno_text(err));
  }
  fsync_parent_dir(path);
}

}  // namespace fp8kit::io
