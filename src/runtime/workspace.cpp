// Workspace (include/fp8kit/runtime/workspace.h): a bump arena over a list of buffers. take()
// serves from the current buffer, moves on to the next one that fits, or inserts a new buffer
// after the current one (scopes' marks point at buffers before it, so they stay valid); reset()
// merges the buffers into one of the high-water size. Tested by tests/cpu/test_workspace.cpp.
#include "fp8kit/runtime/workspace.h"

#include <algorithm>

#include "core/check.h"
#include "fp8kit/platform.h"

namespace fp8kit {
namespace {

constexpr size_t kAlignment = 256;
constexpr size_t kMinChunkBytes = size_t(1) << 20;

size_t align_up(size_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

}  // namespace

Workspace::Workspace(Device device, Stream stream) : device_(device), stream_(stream) {}

Workspace::~Workspace() {
  // Kernels queued on the stream may still read the buffers: let them finish before the memory
  // goes back to the allocator (which may hand it to another stream at once).
  if (device_.is_cuda() && !chunks_.empty()) {
    try {
      stream_synchronize(stream_);
    } catch (...) {
    }
  }
}

size_t Workspace::used_bytes() const {
  size_t used = offset_;
  for (size_t i = 0; i < current_ && i < chunks_.size(); ++i) used += chunks_[i]->nbytes();
  return used;
}

Tensor Workspace::take(const Shape& shape, DType dtype) {
  for (int64_t d : shape) FP8KIT_CHECK_ARG(d >= 0, "Workspace::take: negative dimension in {}", shape_to_string(shape));
  const int64_t numel = shape_numel(shape);
  const size_t element = dtype_size(dtype);
  FP8KIT_CHECK_ARG(numel >= 0 && static_cast<uint64_t>(numel) <= (uint64_t(1) << 50) / element,
                   "Workspace::take: {} elements of {} are too many", shape_to_string(shape), dtype_name(dtype));
  const size_t bytes = align_up(std::max<size_t>(static_cast<size_t>(numel) * element, 1));
  size_t start = align_up(offset_);
  if (chunks_.empty() || start + bytes > chunks_[current_]->nbytes()) {
    // The next buffer, if one exists and is large enough; otherwise a new one right after the
    // current buffer.
    const size_t next = chunks_.empty() ? 0 : current_ + 1;
    if (next < chunks_.size() && chunks_[next]->nbytes() >= bytes) {
      current_ = next;
    } else {
      FP8KIT_CHECK_ARG(!frozen_,
                       "Workspace::take: {} bytes more are needed on {} and the workspace is frozen (run a forward "
                       "of this shape before freezing it, e.g. before CUDA graph capture)",
                       bytes, device_.str());
      size_t held = 0;
      for (const auto& c : chunks_) held += c->nbytes();
      const size_t size = std::max({bytes, held, kMinChunkBytes});
      chunks_.insert(chunks_.begin() + static_cast<std::ptrdiff_t>(next), Storage::allocate(size, device_));
      ++allocations_;
      current_ = next;
    }
    start = 0;
  }
  offset_ = start + bytes;
  high_water_ = std::max(high_water_, used_bytes());
  const std::shared_ptr<Storage>& chunk = chunks_[current_];
  return Tensor::from_storage(chunk, shape, contiguous_strides(shape), static_cast<int64_t>(start / element), dtype);
}

void Workspace::rewind(size_t chunk, size_t offset) {
  current_ = chunk;
  offset_ = offset;
}

void Workspace::reset() {
  current_ = 0;
  offset_ = 0;
  if (chunks_.size() <= 1) return;
  if (frozen_) return;  // keep the buffers a captured graph points at
  if (device_.is_cuda()) stream_synchronize(stream_);
  chunks_.clear();
  chunks_.push_back(Storage::allocate(align_up(std::max(high_water_, kMinChunkBytes)), device_));
  ++allocations_;
}

Workspace::Stats Workspace::stats() const {
  Stats s;
  for (const auto& c : chunks_) s.capacity += c->nbytes();
  s.in_use = used_bytes();
  s.high_water = high_water_;
  s.allocations = allocations_;
  return s;
}

}  // namespace fp8kit
