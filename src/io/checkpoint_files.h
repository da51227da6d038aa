// What a checkpoint path may be: the one place that resolves and opens every file fp8kit reads
// from a checkpoint directory (config.json, the index, the shards, hf_quant_config.json, the
// files quantize and dequantize copy). A file must be a regular file after its symbolic links
// are resolved; those links must stay inside the checkpoint; it is opened without blocking (a
// FIFO), after a stat (a device is never opened) and within a size cap per kind of file.
// Tested in tests/cpu/test_checkpoint_files.cpp.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

namespace fp8kit::io {

// Largest JSON file read (config.json, the index, hf_quant_config.json): a 1M-tensor index is
// about 80 MB, and the whole text is held in memory to parse it.
inline constexpr uint64_t kMaxJsonFileBytes = uint64_t{256} << 20;
inline constexpr uint64_t kNoSizeLimit = UINT64_MAX;

// What a file of mode `mode` is, for errors: "a directory", "a FIFO", "a character device", ...
std::string file_type_words(mode_t mode);

// An open regular file: its descriptor (closed by the destructor), its size at open, its path.
class RegularFile {
 public:
  RegularFile(int fd, uint64_t size, std::string path) : fd_(fd), size_(size), path_(std::move(path)) {}
  RegularFile(RegularFile&& other) noexcept;
  RegularFile& operator=(RegularFile&& other) noexcept;
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;
  ~RegularFile();

  int fd() const { return fd_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // The whole content; Error(kIo) naming the file when it cannot be read or grew past `max_bytes`.
  std::string read_all(uint64_t max_bytes) const;

 private:
  friend RegularFile open_regular_file(const std::string&, uint64_t, const char*);
  int fd_ = -1;
  uint64_t size_ = 0;
  std::string path_;
};

// Opens `path` (symbolic links followed) when it is a regular file of at most `max_bytes`
// bytes. Error(kIo) naming the path and what it is otherwise: missing, a dangling link, a link
// loop, a directory, a FIFO, a device, too large. `kind` names the cap in that error ("a JSON file").
RegularFile open_regular_file(const std::string& path, uint64_t max_bytes = kNoSizeLimit,
                              const char* kind = "a file");

// A checkpoint directory, and where its symbolic links may lead: inside the directory itself;
// for a Hugging Face cache snapshot (<repo>/snapshots/<revision>), into <repo>/blobs, where the
// snapshot's links point; and to a file of any Hugging Face cache (.../models--<org>--<name>/
// blobs/<hash>), where old `huggingface-cli download --local-dir` links point.
class CheckpointDir {
 public:
  // Error(kIo) when `dir` is not a directory.
  explicit CheckpointDir(std::string dir);

  const std::string& path() const { return path_; }       // as given
  const std::string& real_path() const { return real_; }  // symbolic links resolved
  std::string join(const std::string& relative) const { return path_ + "/" + relative; }

  enum class Kind { kAbsent, kRegular, kDirectory, kOther };
  struct Entry {
    Kind kind = Kind::kAbsent;
    mode_t mode = 0;       // of the entry, or of the link's target
    bool symlink = false;  // the entry is a symbolic link (to a regular file or directory inside)
  };
  // What `relative` (a path below the directory whose directories are real ones) is. kAbsent when
  // there is no such entry; Error(kIo) for a symbolic link that dangles, loops or leads outside.
  Entry resolve(const std::string& relative) const;
  // Opens `relative` when it is a regular file (as open_regular_file); nullopt when absent.
  std::optional<RegularFile> open_if_present(const std::string& relative, uint64_t max_bytes = kNoSizeLimit,
                                             const char* kind = "a file") const;

 private:
  bool contains(const std::string& real) const;
  std::string path_;
  std::string real_;
  std::string blobs_;  // <repo>/blobs of a Hugging Face cache snapshot, else empty
};

}  // namespace fp8kit::io
