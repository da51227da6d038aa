// Reading and writing safetensors files (https://github.com/huggingface/safetensors format):
// 8-byte little-endian header length N, N bytes of JSON header, then the data section.
//
// The reader treats every file as hostile: it memory-maps the file, validates the whole header
// (length limit, JSON, dtypes, shapes, offsets in bounds, no overlaps, no holes, no duplicate
// names, byte sizes consistent with dtype x shape) before handing out any tensor, and names the
// file and the tensor in every error (ErrorCode::kIo). Tensors are zero-copy views of the mapping.
//
// The writer plans the whole file up front (so tensors can be streamed one at a time, in any
// order, with bounded memory), pads the header to a multiple of 8 bytes, orders tensors by
// descending dtype alignment then name (every tensor naturally aligned; same-size dtypes follow
// the reference writer's order U64 I64 F64, F32 U32 I32, BF16 F16 U16 I16, F8_E5M2FNUZ
// F8_E4M3FNUZ F8_E8M0 F8_E4M3 F8_E5M2 I8 U8 BOOL, so that a file whose only metadata is
// {"format": "pt"} is byte-identical to the Python/Rust writer's), always records
// {"format": "pt"} in __metadata__, and writes to a temporary name that is renamed over the
// target only by finish(): a failure never leaves a half-written file under the final name.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fp8kit/tensor.h"

namespace fp8kit {

// Largest header accepted, as the reference Rust reader (MAX_HEADER_SIZE).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  uint64_t data_begin = 0;  // byte offsets relative to the start of the data section, end exclusive
  uint64_t data_end = 0;
};

class SafetensorsFile {
 public:
  // Opens, maps and validates `path`. Throws Error(kIo) naming the file (and tensor) on any problem.
  static std::shared_ptr<const SafetensorsFile> open(const std::string& path);
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  uint64_t file_size() const { return file_size_; }
  // Tensors in the order of their data offsets.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const TensorInfo* find(std::string_view name) const;  // nullptr when absent
  bool contains(std::string_view name) const { return find(name) != nullptr; }
  // A zero-copy CPU view of tensor `name`; the file stays mapped while any view lives.
  // Throws Error(kIo) when the file has no such tensor. The view is read-only memory (a write
  // through it faults): clone() it to modify. Files from conforming writers align every tensor to
  // its dtype size; a hand-made file may not, so the view's address can be misaligned for its
  // dtype (safe to memcpy from; typed access is the caller's choice).
  Tensor tensor(std::string_view name) const;
  // Maps the pages of tensor `name` ahead of use in one call (advice: never fails).
  void prefetch(std::string_view name) const;
  // Advises the OS that the pages of tensor `name` are not needed for now: they leave this
  // process's resident set (they stay in the page cache and come back when touched again).
  // Checks first, as verify does, that the file did not shrink while the tensor was read.
  void release(std::string_view name) const;
  // Error(kIo) naming the file and tensor `name` when the file shrank since it was opened. A
  // view's pages past the new end read as zeros instead of crashing the process (SIGBUS), so
  // whoever reads a view calls verify (or release) before trusting what it read.
  void verify(std::string_view name) const;

 private:
  SafetensorsFile() = default;
  struct Mapping;
  std::pair<uint8_t*, size_t> page_range(const TensorInfo& info) const;
  std::string path_;
  uint64_t file_size_ = 0;
  uint64_t data_start_ = 0;  // 8 + header length
  std::shared_ptr<Mapping> mapping_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> by_name_;
  std::map<std::string, std::string> metadata_;
};

struct TensorSpec {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
};

class SafetensorsWriter {
 public:
  // Plans the file and creates "<path>.tmp.<pid>" holding the header. `metadata` is string to
  // string; {"format": "pt"} is added when it has no "format". Throws Error(kInvalidArgument) for
  // duplicate or empty names and Error(kIo) when the file cannot be created. A leftover
  // temporary file of the same name is replaced, so one process must not run two writers for
  // the same path at once.
  SafetensorsWriter(std::string path, std::vector<TensorSpec> specs,
                    std::map<std::string, std::string> metadata = {});
  ~SafetensorsWriter();  // removes the temporary file unless finish() succeeded
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // Writes the data of planned tensor `name` (each exactly once, any order). `data` is a CPU
  // tensor of the planned dtype and shape, any strides.
  void write(std::string_view name, const Tensor& data);
  // Checks that every planned tensor was written, flushes to disk and renames to the final path.
  void finish();

  const std::string& path() const { return path_; }
  uint64_t data_bytes() const { return data_bytes_; }  // size of the data section

 private:
  struct Planned;
  std::string path_;
  std::string tmp_path_;
  int fd_ = -1;
  uint64_t data_start_ = 0;
  uint64_t data_bytes_ = 0;
  std::vector<Planned> planned_;
  std::map<std::string, size_t, std::less<>> by_name_;
  bool finished_ = false;
};

// Writes every tensor of `tensors` to `path` (atomically, as SafetensorsWriter).
void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace fp8kit
