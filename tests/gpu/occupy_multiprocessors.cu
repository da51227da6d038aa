#include "occupy_multiprocessors.h"

#include <cstdint>

#include "core/cuda/cuda_check.h"

namespace fp8kit::gpu_test {
namespace {

constexpr int kThreads = 1024;

__device__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void hold_kernel(const volatile int* flag, uint64_t limit_ns) {
  const uint64_t start = global_ns();
  while (*flag == 0 && global_ns() - start < limit_ns) __nanosleep(2000);
}

}  // namespace

OccupiedMultiprocessors::OccupiedMultiprocessors(cudaStream_t stream, double limit_s) : stream_(stream) {
  int device = 0, sms = 0, per_sm = 0;
  FP8KIT_CUDA_CHECK(cudaGetDevice(&device));
  FP8KIT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  FP8KIT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, hold_kernel, kThreads, 0));
  blocks_ = sms * per_sm;
  int* host = nullptr;
  FP8KIT_CUDA_CHECK(cudaHostAlloc(&host, sizeof(int), cudaHostAllocMapped));
  *host = 0;
  flag_ = host;
  int* device_flag = nullptr;
  FP8KIT_CUDA_CHECK(cudaHostGetDevicePointer(&device_flag, host, 0));
  hold_kernel<<<blocks_, kThreads, 0, stream_>>>(device_flag, uint64_t(limit_s * 1e9));
  FP8KIT_CUDA_CHECK(cudaGetLastError());
}

void OccupiedMultiprocessors::release() { *flag_ = 1; }

OccupiedMultiprocessors::~OccupiedMultiprocessors() {
  release();
  cudaStreamSynchronize(stream_);
  cudaFreeHost(const_cast<int*>(flag_));
}

}  // namespace fp8kit::gpu_test
