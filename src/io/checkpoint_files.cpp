// What a checkpoint path may be (see checkpoint_files.h).
// Tested in tests/cpu/test_checkpoint_files.cpp.
#include "io/checkpoint_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <utility>

#include "core/check.h"
#include "io/file_util.h"

namespace fp8kit::io {
namespace {

std::optional<std::string> real_path_of(const std::string& path, int& err) {
  char* resolved = ::realpath(path.c_str(), nullptr);
  if (resolved == nullptr) {
    err = errno;
    return std::nullopt;
  }
  std::string out(resolved);
  std::free(resolved);
  return out;
}

std::string link_target(const std::string& path) {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink(path.c_str(), buf, sizeof(buf));
  return n < 0 ? std::string("?") : std::string(buf, static_cast<size_t>(n));
}

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Why `path`, which stat() could not follow, cannot be opened: a link that dangles or loops, or
// the plain errno text.
[[noreturn]] void fail_unresolvable(const std::string& path, int err) {
  struct stat l {};
  const bool link = ::lstat(path.c_str(), &l) == 0 && S_ISLNK(l.st_mode);
  if (err == ELOOP) fail(ErrorCode::kIo, "{}: a symbolic link loop (too many levels of symbolic links)", path);
  if (link && err == ENOENT) fail(ErrorCode::kIo, "{}: a dangling symbolic link (to {})", path, link_target(path));
  fail(ErrorCode::kIo, "{}: cannot open: {}", path, errno_text(err));
}

}  // namespace

std::string file_type_words(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

RegularFile::RegularFile(RegularFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), size_(other.size_), path_(std::move(other.path_)) {}

RegularFile& RegularFile::operator=(RegularFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = other.size_;
    path_ = std::move(other.path_);
  }
  return *this;
}

RegularFile::~RegularFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::string RegularFile::read_all(uint64_t max_bytes) const {
  std::string text;
  text.reserve(static_cast<size_t>(std::min(size_, max_bytes)));
  char buf[1 << 16];
  uint64_t offset = 0;
  for (;;) {
    const ssize_t n = ::pread(fd_, buf, sizeof(buf), static_cast<off_t>(offset));
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(ErrorCode::kIo, "{}: cannot read: {}", path_, errno_text(errno));
    }
    offset += static_cast<uint64_t>(n);
    FP8KIT_CHECK(offset <= max_bytes, ErrorCode::kIo, "{}: grew past the limit of {} bytes while it was read", path_,
                 max_bytes);
    text.append(buf, static_cast<size_t>(n));
  }
  return text;
}

RegularFile open_regular_file(const std::string& path, uint64_t max_bytes, const char* kind) {
  // stat before open: opening a device can act on it (a tape rewinds, a watchdog arms).
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail_unresolvable(path, errno);
  FP8KIT_CHECK(S_ISREG(st.st_mode), ErrorCode::kIo, "{}: {}, not a regular file", path, file_type_words(st.st_mode));
  // O_NONBLOCK: should the path be replaced by a FIFO meanwhile, open() still returns at once.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) fail_unresolvable(path, errno);
  RegularFile file(fd, 0, path);  // closes the descriptor should a check below fail
  FP8KIT_CHECK(::fstat(fd, &st) == 0, ErrorCode::kIo, "{}: cannot stat: {}", path, errno_text(errno));
  FP8KIT_CHECK(S_ISREG(st.st_mode), ErrorCode::kIo, "{}: {}, not a regular file", path, file_type_words(st.st_mode));
  const auto size = static_cast<uint64_t>(st.st_size);
  FP8KIT_CHECK(size <= max_bytes, ErrorCode::kIo, "{}: {} bytes, over the limit of {} bytes for {}", path, size,
               max_bytes, kind);
  file.size_ = size;
  return file;
}

CheckpointDir::CheckpointDir(std::string dir) : path_(std::move(dir)) {
  while (path_.size() > 1 && path_.back() == '/') path_.pop_back();
  int err = 0;
  const std::optional<std::string> real = real_path_of(path_, err);
  FP8KIT_CHECK(real.has_value(), ErrorCode::kIo, "{}: not a checkpoint directory: {}", path_, errno_text(err));
  FP8KIT_CHECK(is_directory(*real), ErrorCode::kIo, "{}: not a checkpoint directory: not a directory", path_);
  real_ = *real;
  // A Hugging Face cache: <repo>/snapshots/<revision>/<file> -> ../../blobs/<hash>.
  const size_t slash = real_.rfind('/');
  const std::string parent = real_.substr(0, slash);
  const size_t parent_slash = parent.rfind('/');
  if (slash != std::string::npos && parent_slash != std::string::npos &&
      parent.compare(parent_slash + 1, std::string::npos, "snapshots") == 0) {
    const std::string blobs = parent.substr(0, parent_slash) + "/blobs";
    if (is_directory(blobs)) blobs_ = real_path_of(blobs, err).value_or("");
  }
}

// A file of a Hugging Face cache, <cache>/models--<org>--<name>/blobs/<hash>: where the links of
// a snapshot, and of an old `huggingface-cli download --local-dir` (huggingface_hub < 0.23 linked
// large files into the cache), point.
static bool is_hugging_face_blob(const std::string& real) {
  const size_t file = real.rfind('/');
  if (file == std::string::npos || file == 0) return false;
  const size_t blobs = real.rfind('/', file - 1);
  if (blobs == std::string::npos || real.compare(blobs + 1, file - blobs - 1, "blobs") != 0 || blobs == 0) return false;
  const size_t repo = real.rfind('/', blobs - 1);
  return repo != std::string::npos && real.compare(repo + 1, 8, "models--") == 0 && blobs - repo - 1 > 8;
}

bool CheckpointDir::contains(const std::string& real) const {
  if (is_hugging_face_blob(real)) return true;
  for (const std::string* root : {&real_, &blobs_}) {
    if (root->empty()) continue;
    if (real == *root || (real.size() > root->size() && real.compare(0, root->size(), *root) == 0 &&
                          (root->back() == '/' || real[root->size()] == '/'))) {
      return true;
    }
  }
  return false;
}

CheckpointDir::Entry CheckpointDir::resolve(const std::string& relative) const {
  const std::string path = join(relative);
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return {};
    fail(ErrorCode::kIo, "{}: cannot stat: {}", path, errno_text(errno));
  }
  Entry entry;
  entry.mode = st.st_mode;
  if (S_ISLNK(st.st_mode)) {
    entry.symlink = true;
    int err = 0;
    const std::optional<std::string> real = real_path_of(path, err);
    if (!real) fail_unresolvable(path, err);
    FP8KIT_CHECK(contains(*real), ErrorCode::kIo,
                 "{}: a symbolic link to {}, outside the checkpoint directory: fp8kit does not follow it (put a copy "
                 "of the file in its place)",
                 path, *real);
    FP8KIT_CHECK(::stat(real->c_str(), &st) == 0, ErrorCode::kIo, "{}: cannot stat {}: {}", path, *real,
                 errno_text(errno));
    entry.mode = st.st_mode;
  }
  entry.kind = S_ISREG(entry.mode) ? Kind::kRegular : S_ISDIR(entry.mode) ? Kind::kDirectory : Kind::kOther;
  return entry;
}

std::optional<RegularFile> CheckpointDir::open_if_present(const std::string& relative, uint64_t max_bytes,
                                                          const char* kind) const {
  if (resolve(relative).kind == Kind::kAbsent) return std::nullopt;
  return open_regular_file(join(relative), max_bytes, kind);
}

}  // namespace fp8kit::io
