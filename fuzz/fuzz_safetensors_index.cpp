// libFuzzer target for model.safetensors.index.json (src/io/safetensors_index.cpp): an input must
// either parse into an index whose every shard is a plain file name next to the index, or throw
// fp8kit::Error; any other exception, a broken invariant, a crash or a sanitizer report is a
// finding. Run with scripts/fuzz (seed corpus: fuzz/corpus/safetensors_index/).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "fp8kit/error.h"
#include "io/safetensors_index.h"

namespace {

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "broken invariant: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const fp8kit::SafetensorsIndex index = fp8kit::io::parse_safetensors_index(
        std::string_view(reinterpret_cast<const char*>(data), size), "model.safetensors.index.json");
    for (const auto& [tensor, file] : index.weight_map) {
      require(fp8kit::io::is_plain_file_name(file), "shards are plain file names");
      require(file.find('/') == std::string::npos && file != "." && file != "..", "no shard leaves the directory");
    }
  } catch (const fp8kit::Error&) {
  }
  return 0;
}
