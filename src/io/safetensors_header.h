// Parsing and validation of a whole safetensors header, as a pure function of the file's bytes.
// Every rule of the format (spec/FORMATS.md 1g) is checked here, before any tensor is handed out.
// Tested in tests/cpu/test_safetensors_errors.cpp; fuzzed by fuzz/fuzz_safetensors_header.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "fp8kit/safetensors.h"

namespace fp8kit::io {

// Nesting allowed in a header: the format needs 3 levels (header, tensor entry, shape); the
// slack covers unknown extra fields, which are ignored.
inline constexpr size_t kMaxHeaderJsonDepth = 16;

struct SafetensorsHeader {
  uint64_t data_start = 0;  // 8 + header length: where the data section begins in the file
  uint64_t data_size = 0;   // bytes of the data section (file size - data_start)
  std::vector<TensorInfo> tensors;  // sorted by data offset (then by name)
  std::map<std::string, std::string> metadata;
};

// Validates the file `data[0, size)` (the whole file) and returns its header. Reads nothing
// outside that range. Throws Error(kIo) with a message that names the tensor involved but not
// the file (the caller prefixes "<path>: ").
SafetensorsHeader parse_safetensors_header(const uint8_t* data, size_t size);

}  // namespace fp8kit::io
