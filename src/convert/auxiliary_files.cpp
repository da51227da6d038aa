// plan_auxiliary_files / copy_auxiliary_files (auxiliary_files.h). Every input file is resolved
// and opened through io/checkpoint_files.h, so the same rules hold as for the weights.
// Tested in tests/cpu/test_auxiliary_files.cpp.
#include "convert/auxiliary_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <system_error>

#include "core/check.h"
#include "io/checkpoint_files.h"
#include "io/file_util.h"

namespace fp8kit::convert {
namespace fs = std::filesystem;
namespace {

using Kind = io::CheckpointDir::Kind;

// Deeper trees are refused: no model directory nests like this, and the walk is recursive.
constexpr int kMaxDepth = 32;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Weights in a format other than safetensors (and their indexes): the unquantized model again.
bool is_other_weight_format(std::string name) {
  if (ends_with(name, ".index.json")) name.resize(name.size() - 11);
  static const char* kExtensions[] = {".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".gguf",
                                      ".onnx", ".onnx_data", ".tflite", ".ot"};
  return std::any_of(std::begin(kExtensions), std::end(kExtensions), [&](const char* e) { return ends_with(name, e); });
}

class Planner {
 public:
  Planner(const std::string& input_dir, const OutputPaths& output, const std::vector<std::string>& written)
      : root_(input_dir), output_(output), written_(written) {}

  void walk(const std::string& relative, int depth) {
    FP8KIT_CHECK(depth < kMaxDepth, ErrorCode::kIo, "{}: nests deeper than {} directories", root_.join(relative),
                 kMaxDepth);
    const std::string dir = relative.empty() ? root_.path() : root_.join(relative);
    const std::string dir_real = relative.empty() ? root_.real_path() : root_.real_path() + "/" + relative;
    std::vector<std::string> names;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      names.push_back(it->path().filename().string());
    }
    FP8KIT_CHECK(!ec, ErrorCode::kIo, "{}: cannot list the directory: {}", dir, ec.message());
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      if (output_.is_own_entry(dir_real, name)) continue;
      const bool top = relative.empty();
      if (top && std::find(written_.begin(), written_.end(), name) != written_.end()) continue;
      visit(relative.empty() ? name : relative + "/" + name, name, top, depth);
    }
  }

  AuxiliaryFiles result;

 private:
  void visit(const std::string& rel, const std::string& name, bool top, int depth) {
    const io::CheckpointDir::Entry entry = root_.resolve(rel);
    switch (entry.kind) {
      case Kind::kAbsent: return;  // removed while listed
      case Kind::kDirectory:
        if (top && (name == ".git" || name == ".cache")) {
          result.notes.push_back("left out the subdirectory " + name + "/");
          return;
        }
        FP8KIT_CHECK(!entry.symlink, ErrorCode::kIo,
                     "{}: a symbolic link to a directory: fp8kit copies only files and real directories (put the "
                     "directory itself in its place)",
                     root_.join(rel));
        result.directories.push_back(rel);
        walk(rel, depth + 1);
        return;
      case Kind::kRegular:
        if (is_other_weight_format(name)) {
          result.notes.push_back("left out the weight file " + rel);
        } else if (top && ends_with(name, ".safetensors")) {
          result.notes.push_back("left out " + rel + ": not a shard of the checkpoint");
        } else {
          result.files.push_back(rel);
        }
        return;
      case Kind::kOther:
        fail(ErrorCode::kIo, "{}: {}: fp8kit copies only regular files and directories", root_.join(rel),
             io::file_type_words(entry.mode));
    }
  }

  io::CheckpointDir root_;
  const OutputPaths& output_;
  const std::vector<std::string>& written_;
};

void copy_bytes(const io::RegularFile& from, int to, const std::string& what) {
  bool plain = false;  // read/write instead of copy_file_range
  std::vector<char> buf;
  for (off_t offset = 0;;) {
    ssize_t n;
    if (!plain) {
      off_t in = offset;
      n = ::copy_file_range(from.fd(), &in, to, nullptr, size_t{1} << 30, 0);
      if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP) && offset == 0) {
        plain = true;
        continue;
      }
    } else {
      buf.resize(size_t{1} << 20);
      n = ::pread(from.fd(), buf.data(), buf.size(), offset);
      if (n > 0) io::pwrite_all(to, buf.data(), static_cast<size_t>(n), static_cast<uint64_t>(offset), what);
    }
    if (n == 0) return;
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(ErrorCode::kIo, "{}: {}", what, io::errno_text(errno));
    }
    offset += n;
  }
}

}  // namespace

std::vector<std::string> written_by_conversion(const Checkpoint& checkpoint) {
  std::vector<std::string> names = checkpoint.shard_files();
  names.push_back("config.json");
  names.push_back("model.safetensors.index.json");
  return names;
}

AuxiliaryFiles plan_auxiliary_files(const std::string& input_dir, const OutputPaths& output,
                                    const std::vector<std::string>& written) {
  Planner planner(input_dir, output, written);
  planner.walk("", 0);
  return planner.result;
}

void copy_auxiliary_files(const std::string& input_dir, const AuxiliaryFiles& files, const OutputDirectory& out) {
  const io::CheckpointDir root(input_dir);
  for (const std::string& dir : files.directories) {
    struct stat st {};
    const mode_t mode = ::stat(root.join(dir).c_str(), &st) == 0 ? (st.st_mode & 07777) : 0777;
    FP8KIT_CHECK(::mkdir(out.path(dir).c_str(), mode | 0700) == 0, ErrorCode::kIo, "cannot copy {} to {}/{}: {}",
                 root.join(dir), out.display(), dir, io::errno_text(errno));
  }
  for (const std::string& file : files.files) {
    std::optional<io::RegularFile> from = root.open_if_present(file);
    FP8KIT_CHECK(from.has_value(), ErrorCode::kIo, "{}: removed while fp8kit copied the checkpoint", root.join(file));
    struct stat st {};
    const mode_t mode = ::fstat(from->fd(), &st) == 0 ? (st.st_mode & 0777) : 0666;
    const std::string what = fmt::format("cannot copy {} to {}/{}", root.join(file), out.display(), file);
    const int to = ::open(out.path(file).c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode | 0600);
    FP8KIT_CHECK(to >= 0, ErrorCode::kIo, "{}: {}", what, io::errno_text(errno));
    try {
      copy_bytes(*from, to, what);
      FP8KIT_CHECK(::fsync(to) == 0, ErrorCode::kIo, "{}: {}", what, io::errno_text(errno));
    } catch (...) {
      ::close(to);
      throw;
    }
    FP8KIT_CHECK(::close(to) == 0, ErrorCode::kIo, "{}: {}", what, io::errno_text(errno));
  }
}

}  // namespace fp8kit::convert
