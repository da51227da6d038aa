// SafetensorsWriter and save_safetensors: plan the layout up front, write the header, then pwrite
// each tensor at its planned offset in any order; finish() fsyncs and renames into place.
// Tested in tests/cpu/test_safetensors.cpp (round trips, exact bytes, errors, atomicity).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <set>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/names.h"
#include "fp8kit/safetensors.h"
#include "io/file_util.h"

namespace fp8kit {

struct SafetensorsWriter::Planned {
  TensorSpec spec;
  uint64_t begin = 0;  // offsets in the data section
  uint64_t end = 0;
  bool written = false;
};

namespace {

// Strided tensors are copied through a buffer of at most this many bytes at a time.
constexpr size_t kCopyBufferBytes = size_t{8} << 20;

std::string json_string(const std::string& path, const std::string& s, const char* what) {
  try {
    return nlohmann::json(s).dump();
  } catch (const nlohmann::json::exception&) {
    fail(ErrorCode::kInvalidArgument, "{}: {} {} is not valid UTF-8", shown_path(path), what, quote_name(s));
  }
}

// The header JSON in the layout of the reference writer: __metadata__ first, then the tensors in
// data order, fields dtype, shape, data_offsets; padded with spaces so the data starts at a
// multiple of 8.
std::string header_json(const std::string& path, const std::vector<TensorSpec>& specs, const std::vector<uint64_t>& begins,
                        const std::map<std::string, std::string>& metadata) {
  std::string out = "{";
  if (!metadata.empty()) {
    out += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      if (!first) out += ',';
      first = false;
      out += json_string(path, k, "metadata key");
      out += ':';
      out += json_string(path, v, "metadata value");
    }
    out += '}';
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorSpec& s = specs[i];
    const uint64_t nbytes = static_cast<uint64_t>(shape_numel(s.shape)) * dtype_size(s.dtype);
    if (out.size() > 1) out += ',';
    out += json_string(path, s.name, "tensor name");
    out += fmt::format(":{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}",
                       dtype_safetensors_name(s.dtype), fmt::join(s.shape, ","), begins[i], begins[i] + nbytes);
  }
  out += '}';
  while ((8 + out.size()) % 8 != 0) out += ' ';
  return out;
}

// Position of the dtype in the reference implementation's Dtype enum (safetensors/src/tensor.rs:
// BOOL, F4, F6_E2M3, F6_E3M2, U8, I8, F8_E5M2, F8_E4M3, F8_E8M0, F8_E4M3FNUZ, F8_E5M2FNUZ, I16,
// U16, F16, BF16, I32, U32, F32, C64, F64, I64, U64). Its writer orders tensors by this rank,
// descending, then by name; the rank never increases with the element size, so every tensor is
// aligned, and the files come out byte-identical to the reference writer's.
int reference_rank(DType dtype) {
  switch (dtype) {
    case DType::kBool: return 0;
    case DType::kU8: return 4;
    case DType::kI8: return 5;
    case DType::kE5M2: return 6;
    case DType::kE4M3FN: return 7;
    case DType::kUE8M0: return 8;
    case DType::kE4M3FNUZ: return 9;
    case DType::kE5M2FNUZ: return 10;
    case DType::kI16: return 11;
    case DType::kU16: return 12;
    case DType::kF16: return 13;
    case DType::kBF16: return 14;
    case DType::kI32: return 15;
    case DType::kU32: return 16;
    case DType::kF32: return 17;
    case DType::kF64: return 19;
    case DType::kI64: return 20;
    case DType::kU64: return 21;
  }
  return 0;
}

void check_spec(const std::string& path, const TensorSpec& spec) {
  FP8KIT_CHECK_ARG(!spec.name.empty(), "{}: empty tensor name", shown_path(path));
  FP8KIT_CHECK_ARG(spec.name != "__metadata__", "{}: \"__metadata__\" cannot name a tensor", shown_path(path));
  int64_t product = 1;
  for (const int64_t d : spec.shape) {
    FP8KIT_CHECK_ARG(d >= 0, "{}: tensor {} has a negative dimension in shape {}", shown_path(path),
                     quote_name(spec.name), shape_to_string(spec.shape));
    if (d == 0) continue;
    FP8KIT_CHECK_ARG(!__builtin_mul_overflow(product, d, &product) && product <= (int64_t{1} << 60),
                     "{}: tensor {} has too many elements in shape {}", shown_path(path), quote_name(spec.name),
                     shape_to_string(spec.shape));
  }
}

}  // namespace

SafetensorsWriter::SafetensorsWriter(std::string path, std::vector<TensorSpec> specs,
                                     std::map<std::string, std::string> metadata)
    : path_(std::move(path)) {
  {
    std::set<std::string_view> names;
    for (const TensorSpec& s : specs) {
      check_spec(path_, s);
      FP8KIT_CHECK_ARG(names.insert(s.name).second, "{}: duplicate tensor name {}", shown_path(path_),
                       quote_name(s.name));
    }
  }
  if (metadata.count("format") == 0) metadata["format"] = "pt";

  // Descending alignment (then the reference writer's dtype rank), then name: with the data
  // section starting at a multiple of 8, every tensor lands on a multiple of its element size.
  std::sort(specs.begin(), specs.end(), [](const TensorSpec& a, const TensorSpec& b) {
    const size_t sa = dtype_size(a.dtype), sb = dtype_size(b.dtype);
    if (sa != sb) return sa > sb;
    const int ra = reference_rank(a.dtype), rb = reference_rank(b.dtype);
    return ra != rb ? ra > rb : a.name < b.name;
  });
  std::vector<uint64_t> begins(specs.size());
  uint64_t offset = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    begins[i] = offset;
    const uint64_t nbytes = static_cast<uint64_t>(shape_numel(specs[i].shape)) * dtype_size(specs[i].dtype);
    FP8KIT_CHECK_ARG(!__builtin_add_overflow(offset, nbytes, &offset) && offset <= (uint64_t{1} << 62),
                     "{}: the tensors hold more bytes than a file can", shown_path(path_));
  }
  data_bytes_ = offset;
  const std::string header = header_json(path_, specs, begins, metadata);
  FP8KIT_CHECK_ARG(header.size() <= kMaxSafetensorsHeaderBytes, "{}: header of {} bytes exceeds the limit of {}",
                   shown_path(path_), header.size(), kMaxSafetensorsHeaderBytes);
  data_start_ = 8 + header.size();

  planned_.reserve(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const uint64_t nbytes = static_cast<uint64_t>(shape_numel(specs[i].shape)) * dtype_size(specs[i].dtype);
    by_name_.emplace(specs[i].name, i);
    planned_.push_back(Planned{std::move(specs[i]), begins[i], begins[i] + nbytes, false});
  }

  tmp_path_ = io::temp_path_for(path_);
  // A stale temporary file of an earlier process with the same pid is simply replaced.
  fd_ = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  FP8KIT_CHECK(fd_ >= 0, ErrorCode::kIo, "{}: cannot create: {}", shown_path(tmp_path_), io::errno_text(errno));
  try {
    uint8_t length[8];
    for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(header.size() >> (8 * i));
    io::pwrite_all(fd_, length, 8, 0, tmp_path_);
    io::pwrite_all(fd_, header.data(), header.size(), 8, tmp_path_);
    // The final size up front, so tensors can be written at their offsets in any order.
    FP8KIT_CHECK(::ftruncate(fd_, static_cast<off_t>(data_start_ + data_bytes_)) == 0, ErrorCode::kIo,
                 "{}: cannot extend to {} bytes: {}", shown_path(tmp_path_), data_start_ + data_bytes_,
                 io::errno_text(errno));
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    ::unlink(tmp_path_.c_str());
    throw;
  }
}

SafetensorsWriter::~SafetensorsWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!finished_ && !tmp_path_.empty()) ::unlink(tmp_path_.c_str());
}

namespace {

// Writes a CPU tensor of any strides as its row-major bytes at `offset`: contiguous pieces go
// straight to the file, the others are gathered into `buffer` one bounded chunk at a time.
void write_tensor_bytes(int fd, const Tensor& t, uint64_t offset, std::vector<uint8_t>& buffer,
                        const std::string& path) {
  if (t.nbytes() == 0) return;
  if (t.is_contiguous()) {
    io::pwrite_all(fd, t.data_ptr(), t.nbytes(), offset, path);
    return;
  }
  if (t.nbytes() <= kCopyBufferBytes) {
    buffer.resize(std::max(buffer.size(), t.nbytes()));
    Tensor staged = Tensor::from_blob(buffer.data(), t.shape(), t.dtype());
    staged.copy_(t);
    io::pwrite_all(fd, buffer.data(), t.nbytes(), offset, path);
    return;
  }
  // A tensor of rank 0 is contiguous, so t has a first dimension here.
  const int64_t rows = t.size(0);
  const uint64_t row_bytes = t.nbytes() / static_cast<uint64_t>(rows);
  if (row_bytes > kCopyBufferBytes) {
    for (int64_t r = 0; r < rows; ++r) write_tensor_bytes(fd, t.select(0, r), offset + r * row_bytes, buffer, path);
    return;
  }
  const auto rows_per_chunk = static_cast<int64_t>(kCopyBufferBytes / row_bytes);
  for (int64_t r = 0; r < rows; r += rows_per_chunk) {
    const int64_t n = std::min(rows_per_chunk, rows - r);
    write_tensor_bytes(fd, t.narrow(0, r, n), offset + r * row_bytes, buffer, path);
  }
}

}  // namespace

void SafetensorsWriter::write(std::string_view name, const Tensor& data) {
  FP8KIT_CHECK_ARG(!finished_ && fd_ >= 0, "{}: write({}) after finish()", shown_path(path_), quote_name(name));
  const auto it = by_name_.find(name);
  FP8KIT_CHECK_ARG(it != by_name_.end(), "{}: tensor {} is not in the planned tensors", shown_path(path_),
                   quote_name(name));
  Planned& p = planned_[it->second];
  FP8KIT_CHECK_ARG(!p.written, "{}: tensor {} was already written", shown_path(path_), quote_name(name));
  FP8KIT_CHECK_ARG(data.defined(), "{}: tensor {}: undefined tensor", shown_path(path_), quote_name(name));
  FP8KIT_CHECK_ARG(data.device().is_cpu(), "{}: tensor {}: data must be on the CPU, got {}", shown_path(path_),
                   quote_name(name), data.description());
  FP8KIT_CHECK_ARG(data.dtype() == p.spec.dtype && data.shape() == p.spec.shape,
                   "{}: tensor {} was planned as {}{} but got {}", shown_path(path_), quote_name(name),
                   dtype_name(p.spec.dtype), shape_to_string(p.spec.shape), data.description());
  std::vector<uint8_t> buffer;
  write_tensor_bytes(fd_, data, data_start_ + p.begin, buffer, tmp_path_);
  p.written = true;
}

void SafetensorsWriter::finish() {
  FP8KIT_CHECK_ARG(!finished_ && fd_ >= 0, "{}: finish() called twice", shown_path(path_));
  size_t missing = 0;
  const Planned* first_missing = nullptr;
  for (const Planned& p : planned_) {
    if (p.written) continue;
    if (missing++ == 0) first_missing = &p;
  }
  FP8KIT_CHECK_ARG(missing == 0, "{}: finish() before every tensor was written: {} missing, e.g. {}",
                   shown_path(path_), missing, first_missing ? quote_name(first_missing->spec.name) : "");
  FP8KIT_CHECK(::fsync(fd_) == 0, ErrorCode::kIo, "{}: cannot fsync: {}", shown_path(tmp_path_), io::errno_text(errno));
  const int rc = ::close(fd_);
  fd_ = -1;  // released even when close fails
  FP8KIT_CHECK(rc == 0, ErrorCode::kIo, "{}: cannot close: {}", shown_path(tmp_path_), io::errno_text(errno));
  FP8KIT_CHECK(::rename(tmp_path_.c_str(), path_.c_str()) == 0, ErrorCode::kIo, "{}: cannot rename {} to it: {}",
               shown_path(path_), shown_path(tmp_path_), io::errno_text(errno));
  finished_ = true;
  io::fsync_parent_dir(path_);
}

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::vector<TensorSpec> specs;
  specs.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    FP8KIT_CHECK_ARG(t.defined(), "{}: tensor {}: undefined tensor", shown_path(path), quote_name(name));
    specs.push_back(TensorSpec{name, t.dtype(), t.shape()});
  }
  SafetensorsWriter writer(path, std::move(specs), metadata);
  for (const auto& [name, t] : tensors) writer.write(name, t);
  writer.finish();
}

}  // namespace fp8kit
