// Parsing and validation of a safetensors header (see safetensors_header.h). The rules follow
// the reference Rust reader (safetensors/src/tensor.rs): header length limit, JSON object,
// known dtypes, byte sizes matching dtype x shape, tensors tiling the data section exactly.
// Tested in tests/cpu/test_safetensors_errors.cpp; fuzzed by fuzz/fuzz_safetensors_header.cpp.
#include "io/safetensors_header.h"

#include <algorithm>
#include <limits>
#include <string_view>

#include "core/check.h"
#include "core/names.h"
#include "io/json_util.h"

namespace fp8kit::io {
namespace {

using nlohmann::json;

constexpr std::string_view kMetadataKey = "__metadata__";

[[noreturn]] void on_duplicate_key(const std::vector<std::string>& parents, const std::string& key) {
  if (parents.empty()) {
    if (key == kMetadataKey) fail(ErrorCode::kIo, "duplicate \"__metadata__\" entry");
    fail(ErrorCode::kIo, "duplicate tensor name {}", quote_name(key));
  }
  if (parents[0] == kMetadataKey) fail(ErrorCode::kIo, "__metadata__: duplicate key {}", quote_name(key));
  if (parents.size() == 1) fail(ErrorCode::kIo, "tensor {}: duplicate field {}", quote_name(parents[0]), quote_name(key));
  fail(ErrorCode::kIo, "tensor {}: duplicate key {} inside field {}", quote_name(parents[0]), quote_name(key),
       quote_name(parents[1]));
}

// A non-negative JSON integer. nlohmann stores integers above 2^64 - 1 as floats, and 3.0 is a
// float too: neither is accepted, as serde's u64/usize in the Rust reader.
bool as_u64(const json& v, uint64_t* out) {
  if (v.is_number_unsigned()) {
    *out = v.get<uint64_t>();
    return true;
  }
  if (v.is_number_integer() && v.get<int64_t>() >= 0) {
    *out = static_cast<uint64_t>(v.get<int64_t>());
    return true;
  }
  return false;
}

const json& field(const json& entry, const char* key, const std::string& name) {
  const auto it = entry.find(key);
  FP8KIT_CHECK(it != entry.end(), ErrorCode::kIo, "tensor {}: missing \"{}\"", quote_name(name), key);
  return *it;
}

DType parse_dtype(const json& entry, const std::string& name) {
  const json& v = field(entry, "dtype", name);
  FP8KIT_CHECK(v.is_string(), ErrorCode::kIo, "tensor {}: \"dtype\" must be a string, got {}", quote_name(name),
               json_excerpt(v));
  const auto& s = v.get_ref<const std::string&>();
  const std::optional<DType> dtype = dtype_from_safetensors_name(s);
  FP8KIT_CHECK(dtype.has_value(), ErrorCode::kIo, "tensor {}: unsupported dtype {}", quote_name(name), quote_name(s));
  return *dtype;
}

// Returns the shape and its element count. The product of the non-zero dimensions must fit in
// int64, so that numel and contiguous strides can never overflow later.
Shape parse_shape(const json& entry, const std::string& name, uint64_t* numel) {
  const json& v = field(entry, "shape", name);
  FP8KIT_CHECK(v.is_array(), ErrorCode::kIo, "tensor {}: \"shape\" must be an array of non-negative integers, got {}",
               quote_name(name), json_excerpt(v));
  Shape shape;
  shape.reserve(v.size());
  uint64_t nonzero_product = 1;
  bool has_zero = false;
  for (const json& d : v) {
    uint64_t dim = 0;
    FP8KIT_CHECK(as_u64(d, &dim), ErrorCode::kIo,
                 "tensor {}: \"shape\" must be an array of non-negative integers, got {}", quote_name(name),
                 json_excerpt(v));
    if (dim == 0) {
      has_zero = true;
    } else {
      const bool overflow = __builtin_mul_overflow(nonzero_product, dim, &nonzero_product);
      FP8KIT_CHECK(!overflow && nonzero_product <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
                   ErrorCode::kIo, "tensor {}: shape {} has too many elements", quote_name(name), json_excerpt(v));
    }
    shape.push_back(static_cast<int64_t>(dim));
  }
  *numel = has_zero ? 0 : nonzero_product;
  return shape;
}

TensorInfo parse_tensor(const std::string& name, const json& entry, uint64_t data_size) {
  FP8KIT_CHECK(entry.is_object(), ErrorCode::kIo,
               "tensor {}: entry must be an object with \"dtype\", \"shape\" and \"data_offsets\", got {}",
               quote_name(name), json_excerpt(entry));
  TensorInfo info;
  info.name = name;
  info.dtype = parse_dtype(entry, name);
  uint64_t numel = 0;
  info.shape = parse_shape(entry, name, &numel);

  const json& offsets = field(entry, "data_offsets", name);
  const bool pair = offsets.is_array() && offsets.size() == 2 && as_u64(offsets[0], &info.data_begin) &&
                    as_u64(offsets[1], &info.data_end);
  FP8KIT_CHECK(pair, ErrorCode::kIo,
               "tensor {}: \"data_offsets\" must be [begin, end] with non-negative integers, got {}", quote_name(name),
               json_excerpt(offsets));
  const uint64_t begin = info.data_begin, end = info.data_end;
  FP8KIT_CHECK(begin <= end, ErrorCode::kIo, "tensor {}: data_offsets [{}, {}] end before they begin", quote_name(name),
               begin, end);
  FP8KIT_CHECK(end <= data_size, ErrorCode::kIo,
               "tensor {}: data_offsets [{}, {}] run past the end of the data section ({} bytes)", quote_name(name), begin,
               end, data_size);
  uint64_t nbytes = 0;
  const bool overflow = __builtin_mul_overflow(numel, static_cast<uint64_t>(dtype_size(info.dtype)), &nbytes);
  FP8KIT_CHECK(!overflow && nbytes == end - begin, ErrorCode::kIo,
               "tensor {}: data_offsets [{}, {}] hold {} bytes but {}{} needs {}", quote_name(name), begin, end,
               end - begin, dtype_name(info.dtype), shape_to_string(info.shape),
               overflow ? std::string("more than 2^64") : std::to_string(nbytes));
  return info;
}

std::map<std::string, std::string> parse_metadata(const json& value) {
  FP8KIT_CHECK(value.is_object(), ErrorCode::kIo, "__metadata__ must be an object of string to string, got {}",
               json_excerpt(value));
  std::map<std::string, std::string> metadata;
  for (const auto& [key, v] : value.items()) {
    FP8KIT_CHECK(v.is_string(), ErrorCode::kIo, "__metadata__: value of {} must be a string, got {}", quote_name(key),
                 json_excerpt(v));
    metadata.emplace(key, v.get<std::string>());
  }
  return metadata;
}

// The Rust reader's MetadataIncompleteBuffer and InvalidOffset rules: sorted by offset, the
// tensors cover [0, data_size) exactly once.
void check_tiling(const std::vector<TensorInfo>& tensors, uint64_t data_size) {
  uint64_t expected = 0;
  const TensorInfo* prev = nullptr;
  for (const TensorInfo& t : tensors) {
    if (t.data_begin < expected) {
      fail(ErrorCode::kIo, "tensor {}: data_offsets [{}, {}] overlap tensor {} at [{}, {}]", quote_name(t.name),
           t.data_begin, t.data_end, quote_name(prev->name), prev->data_begin, prev->data_end);
    }
    if (t.data_begin > expected) {
      if (prev == nullptr) {
        fail(ErrorCode::kIo, "tensor {}: data_offsets [{}, {}] leave a hole: bytes [0, {}) belong to no tensor",
             quote_name(t.name), t.data_begin, t.data_end, t.data_begin);
      }
      fail(ErrorCode::kIo, "tensor {}: data_offsets [{}, {}] leave a hole: bytes [{}, {}) after tensor {} belong to "
           "no tensor", quote_name(t.name), t.data_begin, t.data_end, expected, t.data_begin, quote_name(prev->name));
    }
    expected = t.data_end;
    prev = &t;
  }
  if (expected == data_size) return;
  if (prev == nullptr) {
    fail(ErrorCode::kIo, "the data section holds {} bytes but the header lists no tensors", data_size);
  }
  fail(ErrorCode::kIo, "the data section holds {} bytes but its last tensor {} ends at {}: {} trailing bytes belong to "
       "no tensor", data_size, quote_name(prev->name), expected, data_size - expected);
}

std::string describe_byte(unsigned char c) {
  if (c >= 0x20 && c < 0x7f) return fmt::format("'{}'", static_cast<char>(c));
  return fmt::format("0x{:02x}", c);
}

}  // namespace

SafetensorsHeader parse_safetensors_header(const uint8_t* data, size_t size) {
  FP8KIT_CHECK(size >= 8, ErrorCode::kIo, "file is {} bytes, too short for the 8-byte header length", size);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(data[i]) << (8 * i);
  FP8KIT_CHECK(n <= kMaxSafetensorsHeaderBytes, ErrorCode::kIo, "header length {} exceeds the limit of {} bytes", n,
               kMaxSafetensorsHeaderBytes);
  FP8KIT_CHECK(n <= size - 8, ErrorCode::kIo, "header length {} runs past the end of the file ({} bytes)", n, size);

  const std::string_view text(reinterpret_cast<const char*>(data + 8), static_cast<size_t>(n));
  const size_t first = text.find_first_not_of(" \t\n\r");
  FP8KIT_CHECK(first != std::string_view::npos, ErrorCode::kIo, "header is empty (a JSON object was expected)");
  FP8KIT_CHECK(text[first] == '{', ErrorCode::kIo, "header is not a JSON object: it starts with {} instead of '{{'",
               describe_byte(static_cast<unsigned char>(text[first])));
  const json root = parse_json_strict<json>(text, kMaxHeaderJsonDepth, on_duplicate_key);
  FP8KIT_CHECK(root.is_object(), ErrorCode::kIo, "header is not a JSON object");

  SafetensorsHeader header;
  header.data_start = 8 + n;
  header.data_size = size - header.data_start;
  header.tensors.reserve(root.size());
  for (const auto& [key, value] : root.items()) {
    if (key == kMetadataKey) {
      // null is "no metadata" to the Rust reader (an Option), so it is accepted here too.
      if (!value.is_null()) header.metadata = parse_metadata(value);
    } else {
      header.tensors.push_back(parse_tensor(key, value, header.data_size));
    }
  }
  std::sort(header.tensors.begin(), header.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    if (a.data_begin != b.data_begin) return a.data_begin < b.data_begin;
    if (a.data_end != b.data_end) return a.data_end < b.data_end;
    return a.name < b.name;
  });
  check_tiling(header.tensors, header.data_size);
  return header;
}

}  // namespace fp8kit::io
