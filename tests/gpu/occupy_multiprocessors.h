// A kernel that keeps every multiprocessor full (as many resident 1024-thread blocks as fit) until
// the host releases it, for the tests of kernels that must finish beside other work.
#pragma once

#include <cuda_runtime_api.h>

namespace fp8kit::gpu_test {

class OccupiedMultiprocessors {
 public:
  // Launches the holding kernel on `stream`; it ends at release() or after `limit_s` seconds.
  OccupiedMultiprocessors(cudaStream_t stream, double limit_s);
  ~OccupiedMultiprocessors();  // releases, then waits for the kernel
  OccupiedMultiprocessors(const OccupiedMultiprocessors&) = delete;
  OccupiedMultiprocessors& operator=(const OccupiedMultiprocessors&) = delete;

  void release();
  int blocks() const { return blocks_; }

 private:
  cudaStream_t stream_;
  volatile int* flag_ = nullptr;  // mapped host memory the kernel polls
  int blocks_ = 0;
};

}  // namespace fp8kit::gpu_test
