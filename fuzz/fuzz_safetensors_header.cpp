// libFuzzer target for the safetensors header parser (src/io/safetensors_header.cpp). An input
// must either parse into a header that satisfies the format's invariants or throw fp8kit::Error;
// any other exception, a broken invariant, a crash or a sanitizer report is a finding.
// Run with scripts/fuzz (seed corpus: fuzz/corpus/safetensors_header/).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "fp8kit/error.h"
#include "io/safetensors_header.h"

namespace {

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "broken invariant: %s\n", what);
  std::abort();
}

// What a successful parse promises its callers.
void check_invariants(const fp8kit::io::SafetensorsHeader& h, size_t size) {
  require(h.data_start >= 8 && h.data_start <= size, "data section starts inside the file");
  require(h.data_start + h.data_size == size, "data section ends at the end of the file");
  uint64_t expected = 0;
  for (const fp8kit::TensorInfo& t : h.tensors) {
    require(t.data_begin == expected, "tensors tile the data section");
    require(t.data_begin <= t.data_end, "offsets ordered");
    uint64_t numel = 1;
    for (const int64_t d : t.shape) {
      require(d >= 0, "non-negative dimensions");
      require(!__builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel), "element count fits in 64 bits");
    }
    uint64_t nbytes = 0;
    require(!__builtin_mul_overflow(numel, fp8kit::dtype_size(t.dtype), &nbytes), "byte size fits in 64 bits");
    require(nbytes == t.data_end - t.data_begin, "byte size matches dtype x shape");
    expected = t.data_end;
  }
  require(expected == h.data_size, "tensors cover the data section");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    check_invariants(fp8kit::io::parse_safetensors_header(data, size), size);
  } catch (const fp8kit::Error&) {
    // Rejected input: the expected outcome for almost everything the fuzzer makes.
  }
  return 0;
}
