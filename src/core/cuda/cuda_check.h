// Checking every CUDA runtime call and kernel launch. Safe to include from .cu files (no fmt).
// FP8KIT_DEBUG_SYNC=1 makes every checked launch synchronize its stream, so an asynchronous
// fault is reported at the launch that caused it.
#pragma once

#include <cuda_runtime_api.h>

namespace fp8kit::cuda {

// Throws fp8kit::Error(kCuda) naming the call, its place and the CUDA error.
[[noreturn]] void throw_cuda_error(cudaError_t error, const char* expression, const char* file, int line);

inline void check(cudaError_t error, const char* expression, const char* file, int line) {
  if (error != cudaSuccess) throw_cuda_error(error, expression, file, line);
}

bool debug_sync_enabled();  // process_overrides().debug_sync (FP8KIT_DEBUG_SYNC=1)

// After a launch on `stream`: the launch error, and with FP8KIT_DEBUG_SYNC=1 the execution error.
void check_launch(cudaStream_t stream, const char* kernel, const char* file, int line);

}  // namespace fp8kit::cuda

#define FP8KIT_CUDA_CHECK(expr) ::fp8kit::cuda::check((expr), #expr, __FILE__, __LINE__)
#define FP8KIT_CHECK_LAUNCH(stream, kernel) ::fp8kit::cuda::check_launch((stream), (kernel), __FILE__, __LINE__)
