// A file mapping that survives its file shrinking. A read of a mapped page past the new end of
// the file raises SIGBUS; for a registered mapping, fp8kit's SIGBUS handler puts zero pages in
// place of the rest of the mapping and flags it, so the read completes (on any thread, also
// inside a library such as the CUDA driver) and the owner reports the truncation as an Error
// once the read is done (SafetensorsFile::verify). Other SIGBUS go to the handler that was
// there before, or to the default action. Tested in tests/cpu/test_mapping_guard.cpp.
#pragma once

#include <cstddef>

namespace fp8kit::io {

class MappingGuard {
 public:
  // Registers [addr, addr + length) and installs the handler on first use. The first 4096
  // mappings alive at once are guarded; beyond that a mapping is left unguarded.
  MappingGuard(const void* addr, size_t length);
  ~MappingGuard();
  MappingGuard(const MappingGuard&) = delete;
  MappingGuard& operator=(const MappingGuard&) = delete;

  bool active() const { return slot_ >= 0; }
  // A read touched a page past the end of the file: the mapping now holds zeros from there on.
  bool faulted() const;

 private:
  int slot_ = -1;
};

}  // namespace fp8kit::io
