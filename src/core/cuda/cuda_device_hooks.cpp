// The CUDA backend of the core: default allocator, copies between host and device memory and
// within devices, memset. Tested by tests/gpu/test_tensor_cuda.cpp.
#include <cuda_runtime_api.h>

#include "core/check.h"
#include "core/cuda/cuda_allocator.h"
#include "core/cuda/device_guard.h"
#include "core/cuda/strided_copy.h"
#include "core/device_hooks.h"
#include "fp8kit/tensor.h"

namespace fp8kit {
namespace {

cudaStream_t to_cuda(Stream s) { return static_cast<cudaStream_t>(s.handle); }

Allocator* default_allocator(int index) { return &cuda::caching_allocator(index); }

// Copies between two views on one device, any strides.
void copy_on_device(Tensor& dst, const Tensor& src, cudaStream_t stream) {
  if (dst.is_contiguous() && src.is_contiguous()) {
    FP8KIT_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), src.nbytes(), cudaMemcpyDeviceToDevice, stream));
    return;
  }
  FP8KIT_CHECK(src.dim() <= cuda::kMaxCopyDims, ErrorCode::kUnsupported, "copy_ of a {}-D strided CUDA view",
               src.dim());
  cuda::StridedCopyArgs args;
  args.dst = dst.data_ptr();
  args.src = src.data_ptr();
  args.ndim = static_cast<int>(src.dim());
  args.numel = src.numel();
  args.element_size = static_cast<int>(src.element_size());
  for (int d = 0; d < args.ndim; ++d) {
    args.shape[d] = src.size(d);
    args.dst_strides[d] = dst.stride(d);
    args.src_strides[d] = src.stride(d);
  }
  cuda::strided_copy(args, stream);
}

void copy(Tensor& dst, const Tensor& src, Stream s) {
  if (src.numel() == 0) return;
  const cudaStream_t stream = to_cuda(s);
  if (dst.device().is_cuda() && src.device().is_cuda()) {
    if (dst.device() == src.device()) {
      cuda::DeviceGuard guard(dst.device().index);
      copy_on_device(dst, src, stream);
      return;
    }
    // Across devices: through a contiguous copy on the source device, then peer memcpy.
    const Tensor staged = src.is_contiguous() ? src : src.contiguous();
    Tensor target = dst.is_contiguous() ? dst : Tensor::empty(dst.shape(), dst.dtype(), dst.device());
    FP8KIT_CUDA_CHECK(cudaMemcpyPeerAsync(target.data_ptr(), dst.device().index, staged.data_ptr(),
                                          src.device().index, staged.nbytes(), stream));
    if (!dst.is_contiguous()) dst.copy_(target, s);
    return;
  }
  // Host <-> device: both sides made contiguous where they live, one memcpy, then a wait (the host
  // memory is the caller's, pageable, and must be complete when copy_ returns).
  const Tensor staged = src.is_contiguous() ? src : src.contiguous();
  Tensor target = dst.is_contiguous() ? dst : Tensor::empty(dst.shape(), dst.dtype(), dst.device());
  const int device = dst.device().is_cuda() ? dst.device().index : src.device().index;
  cuda::DeviceGuard guard(device);
  const cudaMemcpyKind kind = dst.device().is_cuda() ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
  FP8KIT_CUDA_CHECK(cudaMemcpyAsync(target.data_ptr(), staged.data_ptr(), staged.nbytes(), kind, stream));
  FP8KIT_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (!dst.is_contiguous()) dst.copy_(target, s);
}

void memset(void* ptr, int byte, size_t nbytes, Device device, Stream s) {
  cuda::DeviceGuard guard(device.index);
  FP8KIT_CUDA_CHECK(cudaMemsetAsync(ptr, byte, nbytes, to_cuda(s)));
}

}  // namespace

const DeviceHooks* cuda_device_hooks() {
  static const DeviceHooks hooks{default_allocator, copy, memset};
  return &hooks;
}

}  // namespace fp8kit
