// Element copy between two strided views on one CUDA device (same shape, same element size):
// what Tensor::copy_ uses when a device-side view is not contiguous.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace fp8kit::cuda {

inline constexpr int kMaxCopyDims = 8;

struct StridedCopyArgs {
  void* dst = nullptr;
  const void* src = nullptr;
  int ndim = 0;
  int64_t numel = 0;
  int element_size = 1;  // 1, 2, 4 or 8 bytes
  int64_t shape[kMaxCopyDims] = {};
  int64_t dst_strides[kMaxCopyDims] = {};  // elements
  int64_t src_strides[kMaxCopyDims] = {};
};

void strided_copy(const StridedCopyArgs& args, cudaStream_t stream);

}  // namespace fp8kit::cuda
