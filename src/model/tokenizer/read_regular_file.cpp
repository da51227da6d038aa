// read_regular_file (see tokenizer_impl.h): tokenizer files and the CLI's text files are read
// only when they are regular files of bounded size, so that a FIFO or /dev/zero cannot hang or
// exhaust the process. Tested in tests/cpu/test_tokenizer_errors.cpp.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "core/check.h"
#include "io/file_util.h"
#include "model/tokenizer/tokenizer_impl.h"

namespace fp8kit::tok {

std::string read_regular_file(const std::string& path, size_t max_bytes) {
  // O_NONBLOCK: opening a FIFO without a writer returns at once instead of waiting.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  FP8KIT_CHECK(fd >= 0, ErrorCode::kIo, "{}: cannot open: {}", path, io::errno_text(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(ErrorCode::kIo, "{}: not a regular file", path);
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    fail(ErrorCode::kIo, "{}: {} bytes, more than the {} bytes fp8kit reads from such a file", path, st.st_size, max_bytes);
  }
  // Read from the descriptor that was checked, so that the file cannot be swapped in between.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      FP8KIT_CHECK(n == 0, ErrorCode::kIo, "{}: cannot read: {}", path, io::errno_text(err));
      fail(ErrorCode::kIo, "{}: shrank while being read", path);
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return text;
}

}  // namespace fp8kit::tok
