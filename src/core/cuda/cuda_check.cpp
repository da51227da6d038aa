#include "core/cuda/cuda_check.h"

#include <cstring>

#include "core/check.h"
#include "fp8kit/runtime/overrides.h"

namespace fp8kit::cuda {

void throw_cuda_error(cudaError_t error, const char* expression, const char* file, int line) {
  const char* base = std::strrchr(file, '/');
  fail(ErrorCode::kCuda, "{} failed at {}:{}: {} ({})", expression, base ? base + 1 : file, line,
       cudaGetErrorString(error), cudaGetErrorName(error));
}

bool debug_sync_enabled() { return process_overrides().debug_sync; }

void check_launch(cudaStream_t stream, const char* kernel, const char* file, int line) {
  check(cudaGetLastError(), kernel, file, line);
  if (!debug_sync_enabled()) return;
  // A stream being captured into a graph cannot be synchronized: the kernel runs on replay.
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  check(cudaStreamIsCapturing(stream, &capturing), kernel, file, line);
  if (capturing == cudaStreamCaptureStatusNone) check(cudaStreamSynchronize(stream), kernel, file, line);
}

}  // namespace fp8kit::cuda
