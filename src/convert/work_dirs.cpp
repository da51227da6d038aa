// Work directories of an output (work_dirs.h).
// Tested in tests/cpu/test_output_directory.cpp.
#include "convert/work_dirs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <filesystem>
#include <random>
#include <system_error>

#include <fmt/format.h>

#include "core/check.h"
#include "io/file_util.h"

namespace fp8kit::convert {
namespace fs = std::filesystem;

std::string work_dir_name(const std::string& prefix) {
  static thread_local std::mt19937 random{std::random_device{}()};
  return fmt::format("{}{}.{:08x}", prefix, ::getpid(), static_cast<uint32_t>(random()));
}

bool is_work_dir_name(const std::string& prefix, const std::string& name) {
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return false;
  const std::string rest = name.substr(prefix.size());
  const size_t dot = rest.find('.');
  if (dot == 0 || dot == std::string::npos || rest.size() - dot - 1 != 8) return false;
  for (size_t i = 0; i < dot; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(rest[i]))) return false;
  }
  for (size_t i = dot + 1; i < rest.size(); ++i) {
    if (!std::isxdigit(static_cast<unsigned char>(rest[i]))) return false;
  }
  return true;
}

void write_marker(const std::string& dir) {
  const std::string path = dir + "/" + kWorkDirMarker;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0666);
  FP8KIT_CHECK(fd >= 0, ErrorCode::kIo, "{}: cannot create: {}", path, io::errno_text(errno));
  static const char kText[] = "fp8kit work directory: removed by the next fp8kit run to this output\n";
  const ssize_t n = ::write(fd, kText, sizeof(kText) - 1);
  const int err = errno;
  ::close(fd);
  FP8KIT_CHECK(n == static_cast<ssize_t>(sizeof(kText) - 1), ErrorCode::kIo, "{}: cannot write: {}", path,
               io::errno_text(err));
}

void remove_marker(const std::string& dir) { ::unlink((dir + "/" + kWorkDirMarker).c_str()); }

bool has_marker(const std::string& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return false;
  return ::lstat((dir + "/" + kWorkDirMarker).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool remove_tree(const std::string& dir) {
  std::error_code ec;
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return errno == ENOENT;
  if (!S_ISDIR(st.st_mode)) return ::unlink(dir.c_str()) == 0;
  bool clean = true;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().filename() == kWorkDirMarker) continue;
    std::error_code remove_ec;
    fs::remove_all(it->path(), remove_ec);
    clean = clean && !remove_ec;
  }
  remove_marker(dir);
  return ::rmdir(dir.c_str()) == 0 && clean && !ec;
}

}  // namespace fp8kit::convert
