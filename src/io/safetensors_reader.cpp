// SafetensorsFile: a read-only memory map of a validated safetensors file, handing out zero-copy
// tensor views. The header is validated by io/safetensors_header.cpp before anything is exposed.
// Tested in tests/cpu/test_safetensors.cpp and tests/cpu/test_safetensors_errors.cpp.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "core/check.h"
#include "core/names.h"
#include "fp8kit/safetensors.h"
#include "io/checkpoint_files.h"
#include "io/file_util.h"
#include "core/names.h"
#include "io/mapping_guard.h"
#include "io/safetensors_header.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  // Linux 5.14; older C libraries lack the name
#endif

namespace fp8kit {

// The mapping outlives the SafetensorsFile while tensor views hold it. The descriptor stays open
// to tell whether the file shrank; the guard turns a read past its new end into zeros and a flag.
struct SafetensorsFile::Mapping {
  void* addr = nullptr;
  size_t length = 0;
  int fd = -1;
  std::unique_ptr<io::MappingGuard> guard;

  Mapping(void* a, size_t n, int f) : addr(a), length(n), fd(f), guard(std::make_unique<io::MappingGuard>(a, n)) {}
  ~Mapping() {
    guard.reset();  // unregistered before the addresses can be reused
    ::munmap(addr, length);
    ::close(fd);
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  const uint8_t* bytes() const { return static_cast<const uint8_t*>(addr); }
};

std::shared_ptr<const SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  io::RegularFile source = io::open_regular_file(path);
  const uint64_t size = source.size();
  FP8KIT_CHECK(size != 0, ErrorCode::kIo, "{}: empty file (0 bytes), not a safetensors file", shown_path(path));
  void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, source.fd(), 0);
  FP8KIT_CHECK(addr != MAP_FAILED, ErrorCode::kIo, "{}: cannot map {} bytes: {}", shown_path(path), size, io::errno_text(errno));
  const int fd = ::dup(source.fd());
  if (fd < 0) {
    const int err = errno;
    ::munmap(addr, size);
    fail(ErrorCode::kIo, "{}: cannot keep the file open: {}", shown_path(path), io::errno_text(err));
  }
  auto mapping = std::make_shared<Mapping>(addr, static_cast<size_t>(size), fd);

  io::SafetensorsHeader header;
  try {
    header = io::parse_safetensors_header(mapping->bytes(), mapping->length);
  } catch (const Error& e) {
    throw Error(e.code(), shown_path(path) + ": " + e.what());
  }

  std::shared_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  file->file_size_ = size;
  file->data_start_ = header.data_start;
  file->mapping_ = std::move(mapping);
  file->tensors_ = std::move(header.tensors);
  file->metadata_ = std::move(header.metadata);
  for (size_t i = 0; i < file->tensors_.size(); ++i) file->by_name_.emplace(file->tensors_[i].name, i);
  return file;
}

SafetensorsFile::~SafetensorsFile() = default;

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

namespace {

const TensorInfo& require(const SafetensorsFile& file, std::string_view name) {
  const TensorInfo* info = file.find(name);
  FP8KIT_CHECK(info != nullptr, ErrorCode::kIo, "{}: no tensor named {}", shown_path(file.path()), quote_name(name));
  return *info;
}

}  // namespace

Tensor SafetensorsFile::tensor(std::string_view name) const {
  const TensorInfo& info = require(*this, name);
  // The mapping is read-only: the view's data must not be written (clone() first). Its address
  // is data_start + data_begin past a page boundary, which a hostile file can leave misaligned
  // for the dtype; io never dereferences it as a typed pointer.
  auto* data = const_cast<uint8_t*>(mapping_->bytes() + data_start_ + info.data_begin);
  auto storage = Storage::borrow(data, static_cast<size_t>(info.data_end - info.data_begin), Device::cpu(),
                                 mapping_);
  return Tensor::from_storage(std::move(storage), info.shape, contiguous_strides(info.shape), 0, info.dtype);
}

// The page range of tensor `name` in the mapping, rounded outward: harmless for a read-only,
// file-backed mapping, whose pages are read back from the page cache when touched.
std::pair<uint8_t*, size_t> SafetensorsFile::page_range(const TensorInfo& info) const {
  const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t begin = (data_start_ + info.data_begin) / page * page;
  const uint64_t mapped_end = (mapping_->length + page - 1) / page * page;
  const uint64_t end = std::min(mapped_end, (data_start_ + info.data_end + page - 1) / page * page);
  return {static_cast<uint8_t*>(mapping_->addr) + begin, static_cast<size_t>(end - begin)};
}

void SafetensorsFile::prefetch(std::string_view name) const {
  const TensorInfo& info = require(*this, name);
  if (info.data_end == info.data_begin) return;
  const auto [addr, length] = page_range(info);
  // One call maps every page, instead of one page fault per few pages on first touch; kernels
  // before 5.14 lack MADV_POPULATE_READ and only get read-ahead. Advice only, but EFAULT means a
  // page lies past the end of the file: it shrank, which verify reports.
  if (::madvise(addr, length, MADV_POPULATE_READ) != 0) {
    if (errno == EFAULT) verify(name);
    ::madvise(addr, length, MADV_WILLNEED);
  }
}

void SafetensorsFile::release(std::string_view name) const {
  const TensorInfo& info = require(*this, name);
  verify(name);
  if (info.data_end == info.data_begin) return;
  const auto [addr, length] = page_range(info);
  FP8KIT_CHECK(::madvise(addr, length, MADV_DONTNEED) == 0, ErrorCode::kIo, "{}: madvise of tensor {} failed: {}",
               shown_path(path_), quote_name(name), io::errno_text(errno));
}

void SafetensorsFile::verify(std::string_view name) const {
  struct stat st {};
  const bool stat_ok = ::fstat(mapping_->fd, &st) == 0;
  const uint64_t now = stat_ok ? static_cast<uint64_t>(st.st_size) : 0;
  if (!mapping_->guard->faulted() && stat_ok && now >= file_size_) return;
  fail(ErrorCode::kIo, "{}: the file shrank from {} to {} bytes while tensor {} was read: it must not change while "
       "fp8kit reads it", path_, file_size_, now, quote_name(name));
}

}  // namespace fp8kit
