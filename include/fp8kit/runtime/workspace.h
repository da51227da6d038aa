// Workspace: the scratch arena an op takes its temporaries from, given back in order (last taken,
// first given back) and reset between forwards. After the first forward of a shape it holds one
// buffer of the largest size any forward needed, so later forwards allocate nothing.
//
// On CUDA it is stream-ordered: every kernel that uses workspace memory runs on the stream the
// workspace belongs to, so memory given back is reused only by kernels queued after the ones that
// used it, and the stream itself orders them. Buffers are released (when reset() grows the arena)
// only after that stream has passed every kernel queued so far. A frozen workspace refuses to
// grow, so a forward captured in a CUDA graph can never allocate, and never alias memory a
// later forward takes (capture the graph after a warm-up forward of the same shape).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "fp8kit/device.h"
#include "fp8kit/stream.h"
#include "fp8kit/tensor.h"

namespace fp8kit {

class Workspace {
 public:
  explicit Workspace(Device device = Device::cpu(), Stream stream = {});
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  Device device() const { return device_; }
  Stream stream() const { return stream_; }

  // A contiguous tensor of `shape` and `dtype` on the workspace's device, 256-byte aligned, with
  // unspecified contents. It stays valid until a Scope opened before it closes, or reset(); a
  // tensor kept past that still points at live memory (the arena's buffers are reference
  // counted) whose contents later ops overwrite. Error(kInvalidArgument) when frozen and the
  // arena must grow.
  Tensor take(const Shape& shape, DType dtype);

  // Everything taken while a Scope is open is given back when it closes (scopes nest).
  class Scope {
   public:
    explicit Scope(Workspace& workspace) : workspace_(workspace), mark_(workspace.offset_), chunk_(workspace.current_) {}
    ~Scope() { workspace_.rewind(chunk_, mark_); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Workspace& workspace_;
    size_t mark_;
    size_t chunk_;
  };

  // Between forwards: gives everything back. When the last forward needed more than the first
  // buffer, the buffers are replaced by one of the high-water size (on CUDA after the stream has
  // passed the kernels that used them).
  void reset();

  // Refuse (true) or allow (false, the default) growth of the arena.
  void freeze(bool frozen) { frozen_ = frozen; }
  bool frozen() const { return frozen_; }

  struct Stats {
    size_t capacity = 0;       // bytes held
    size_t in_use = 0;         // bytes taken and not given back
    size_t high_water = 0;     // most bytes in use at once since construction
    int64_t allocations = 0;   // buffers allocated since construction
  };
  Stats stats() const;

 private:
  void rewind(size_t chunk, size_t offset);
  size_t used_bytes() const;

  Device device_;
  Stream stream_;
  std::vector<std::shared_ptr<Storage>> chunks_;  // in order of allocation
  size_t current_ = 0;                            // chunk that take() serves from
  size_t offset_ = 0;                             // bytes used in chunks_[current_]
  size_t high_water_ = 0;
  int64_t allocations_ = 0;
  bool frozen_ = false;
};

}  // namespace fp8kit
