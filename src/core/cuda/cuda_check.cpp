#include "core/cuda/cuda_check.h"

#include <cstdlib>
#include <cstring>

#include "core/check.h"

namespace fp8kit::cuda {

void throw_cuda_error(cudaError_t error, const char* expression, const char* file, int line) {
  const char* base = std::strrchr(file, '/');
  fail(ErrorCode::kCuda, "{} failed at {}:{}: {} ({})", expression, base ? base + 1 : file, line,
       cudaGetErrorString(error), cudaGetErrorName(error));
}

bool debug_sync_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("FP8KIT_DEBUG_SYNC");
    return v != nullptr && std::strcmp(v, "0") != 0 && v[0] != '\0';
  }();
  return enabled;
}

void check_launch(cudaStream_t stream, const char* kernel, const char* file, int line) {
  check(cudaGetLastError(), kernel, file, line);
  if (debug_sync_enabled()) check(cudaStreamSynchronize(stream), kernel, file, line);
}

}  // namespace fp8kit::cuda
