// OutputLock (output_lock.h). A holder removes the lock file while it still holds the lock, so a
// run that opened the old file before the removal finds, once it gets the lock, that the path no
// longer names the file it locked, and starts again on the new one.
// Tested in tests/cpu/test_output_directory.cpp.
#include "convert/output_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/check.h"
#include "io/file_util.h"

namespace fp8kit::convert {
namespace {

bool same_file(int fd, const std::string& path) {
  struct stat a {}, b {};
  return ::fstat(fd, &a) == 0 && ::lstat(path.c_str(), &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

bool holds_lock_text(int fd) {
  const size_t n = std::strlen(kOutputLockText);
  char buf[256];
  const ssize_t got = ::pread(fd, buf, sizeof(buf), 0);
  return got == static_cast<ssize_t>(n) && std::memcmp(buf, kOutputLockText, n) == 0;
}

}  // namespace

OutputLock::OutputLock(std::string lock_path, const std::string& output) : path_(std::move(lock_path)) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    bool created = true;
    int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0 && errno == EEXIST) {
      created = false;
      fd = ::open(path_.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
      if (fd < 0 && errno == ENOENT) continue;  // removed by its holder meanwhile
    }
    FP8KIT_CHECK(fd >= 0, ErrorCode::kIo, "{}: cannot create the lock file {}: {}", output, path_,
                 errno == ELOOP ? std::string("it is a symbolic link") : io::errno_text(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      fail(ErrorCode::kIo, "{}: the lock file {} is not a regular file", output, path_);
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      ::close(fd);
      FP8KIT_CHECK(err != EWOULDBLOCK, ErrorCode::kIo,
                   "{}: another fp8kit run is writing this output (it holds {}); wait for it to end or choose "
                   "another output directory",
                   output, path_);
      fail(ErrorCode::kIo, "{}: cannot lock {}: {}", output, path_, io::errno_text(err));
    }
    if (!same_file(fd, path_)) {  // its holder removed it before releasing it
      ::close(fd);
      continue;
    }
    if (created) {
      const size_t n = std::strlen(kOutputLockText);
      if (::pwrite(fd, kOutputLockText, n, 0) != static_cast<ssize_t>(n)) {
        const int err = errno;
        ::unlink(path_.c_str());
        ::close(fd);
        fail(ErrorCode::kIo, "{}: cannot write the lock file {}: {}", output, path_, io::errno_text(err));
      }
    }
    fd_ = fd;
    ours_ = created || holds_lock_text(fd);
    return;
  }
  fail(ErrorCode::kIo, "{}: cannot lock {}: it keeps being replaced", output, path_);
}

void OutputLock::remove_file_before_exit() {
  if (fd_ >= 0 && ours_ && same_file(fd_, path_) && holds_lock_text(fd_)) ::unlink(path_.c_str());
  ours_ = false;
}

OutputLock::~OutputLock() {
  if (fd_ < 0) return;
  remove_file_before_exit();
  ::close(fd_);  // releases the lock
}

}  // namespace fp8kit::convert
