#include "core/cuda/cuda_graph.h"

#include <cuda_runtime.h>

#include <utility>

#include "core/check.h"
#include "core/cuda/cuda_check.h"
#include "core/thread_allocator.h"

namespace fp8kit::cuda {
namespace {

cudaStream_t to_cuda(Stream s) { return static_cast<cudaStream_t>(s.handle); }

}  // namespace

OwnedStream::OwnedStream() {
  cudaStream_t s = nullptr;
  FP8KIT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  stream_.handle = s;
}

OwnedStream::~OwnedStream() {
  if (stream_.handle != nullptr) cudaStreamDestroy(to_cuda(stream_));
}

void stream_wait(Stream waiter, Stream signaller) {
  if (waiter.handle == signaller.handle) return;
  cudaEvent_t event = nullptr;
  FP8KIT_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  const cudaError_t recorded = cudaEventRecord(event, to_cuda(signaller));
  const cudaError_t waited = recorded == cudaSuccess ? cudaStreamWaitEvent(to_cuda(waiter), event, 0) : recorded;
  cudaEventDestroy(event);  // released once the wait has been satisfied
  FP8KIT_CUDA_CHECK(waited);
}

CapturedGraph::~CapturedGraph() { reset(); }

CapturedGraph::CapturedGraph(CapturedGraph&& other) noexcept
    : graph_(std::exchange(other.graph_, nullptr)), exec_(std::exchange(other.exec_, nullptr)) {}

CapturedGraph& CapturedGraph::operator=(CapturedGraph&& other) noexcept {
  if (this != &other) {
    reset();
    graph_ = std::exchange(other.graph_, nullptr);
    exec_ = std::exchange(other.exec_, nullptr);
  }
  return *this;
}

void CapturedGraph::reset() {
  if (exec_ != nullptr) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
  if (graph_ != nullptr) cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
  exec_ = graph_ = nullptr;
}

CapturedGraph CapturedGraph::capture(Stream stream, int device, GraphMemoryPool& pool,
                                     const std::function<void()>& record) {
  FP8KIT_CHECK(stream.handle != nullptr, ErrorCode::kInvalidArgument,
               "a CUDA graph cannot be captured on the legacy default stream");
  const cudaStream_t s = to_cuda(stream);
  FP8KIT_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  cudaGraph_t graph = nullptr;
  try {
    ThreadAllocatorScope allocations(Device::cuda(device), &pool);
    record();
  } catch (...) {
    // End the capture whatever state it is in, drop what it made, clear the error it left.
    cudaStreamEndCapture(s, &graph);
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();
    throw;
  }
  const cudaError_t ended = cudaStreamEndCapture(s, &graph);
  if (ended != cudaSuccess) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();
    fail(ErrorCode::kCuda, "CUDA graph capture failed: {} ({}); some call in the captured work is not capturable",
         cudaGetErrorString(ended), cudaGetErrorName(ended));
  }
  CapturedGraph out;
  out.graph_ = graph;
  cudaGraphExec_t exec = nullptr;
  FP8KIT_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  out.exec_ = exec;
  return out;
}

void CapturedGraph::launch(Stream stream) const {
  FP8KIT_CHECK(exec_ != nullptr, ErrorCode::kInternal, "launch of an empty CUDA graph");
  FP8KIT_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), to_cuda(stream)));
}

}  // namespace fp8kit::cuda
