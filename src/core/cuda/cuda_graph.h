// CUDA graph capture for the host code that records a forward (the runner's decode graphs):
// an owned stream, stream-to-stream ordering, and a graph captured from what a function queues,
// with no CUDA types in the interface. Capture uses the thread-local mode, so other threads
// keep working; what the captured function allocates on the stream's device comes from a
// GraphMemoryPool (core/cuda/graph_memory_pool.h), so later work never gets those addresses.
#pragma once

#include <functional>

#include "core/cuda/graph_memory_pool.h"
#include "fp8kit/stream.h"

namespace fp8kit::cuda {

// A non-blocking stream on the current device, destroyed with the object.
class OwnedStream {
 public:
  OwnedStream();
  ~OwnedStream();
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;
  Stream get() const { return stream_; }

 private:
  Stream stream_;
};

// Work queued on `waiter` from now on starts after everything queued on `signaller` so far.
void stream_wait(Stream waiter, Stream signaller);

class CapturedGraph {
 public:
  CapturedGraph() = default;
  ~CapturedGraph();
  CapturedGraph(CapturedGraph&& other) noexcept;
  CapturedGraph& operator=(CapturedGraph&& other) noexcept;
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;

  // Captures what `record` queues on `stream` (not the legacy default stream) and instantiates
  // it, with the thread's allocations on `device` served from `pool`. When `record` throws or the
  // capture is invalidated (a synchronizing call, a host copy), the capture is ended and the
  // error rethrown (kCuda, naming the failure); nothing is left capturing.
  static CapturedGraph capture(Stream stream, int device, GraphMemoryPool& pool, const std::function<void()>& record);

  // Queues one replay on `stream` (any stream of the graph's device).
  void launch(Stream stream) const;

 private:
  void reset();
  void* graph_ = nullptr;  // cudaGraph_t
  void* exec_ = nullptr;   // cudaGraphExec_t
};

}  // namespace fp8kit::cuda
