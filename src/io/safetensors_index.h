// The text half of read_safetensors_index (fp8kit/checkpoint.h): a model.safetensors.index.json
// already in memory, parsed and checked (every shard a plain file name next to the index). Errors
// name `path`. Fuzzed by fuzz/fuzz_safetensors_index.cpp; tested in tests/cpu/test_checkpoint.cpp.
#pragma once

#include <string>
#include <string_view>

#include "fp8kit/checkpoint.h"

namespace fp8kit::io {

SafetensorsIndex parse_safetensors_index(std::string_view text, const std::string& path);

// A shard name that stays in the checkpoint directory: not empty, ".", "..", no '/' and no NUL.
bool is_plain_file_name(const std::string& name);

}  // namespace fp8kit::io
