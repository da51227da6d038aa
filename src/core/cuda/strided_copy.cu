// Strided element copy on one device; reference: Tensor::copy_ on the CPU (tensor.cpp). One
// thread per element: index arithmetic bound, used only for non-contiguous views.
#include "core/cuda/cuda_check.h"
#include "core/cuda/strided_copy.h"

namespace fp8kit::cuda {
namespace {

template <typename T>
__global__ void strided_copy_kernel(StridedCopyArgs args) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < args.numel; i += stride) {
    int64_t rest = i, d_off = 0, s_off = 0;
    for (int d = args.ndim - 1; d >= 0; --d) {
      const int64_t idx = rest % args.shape[d];
      rest /= args.shape[d];
      d_off += idx * args.dst_strides[d];
      s_off += idx * args.src_strides[d];
    }
    static_cast<T*>(args.dst)[d_off] = static_cast<const T*>(args.src)[s_off];
  }
}

}  // namespace

void strided_copy(const StridedCopyArgs& args, cudaStream_t stream) {
  if (args.numel == 0) return;
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((args.numel + threads - 1) / threads, 65535);
  switch (args.element_size) {
    case 1: strided_copy_kernel<uint8_t><<<blocks, threads, 0, stream>>>(args); break;
    case 2: strided_copy_kernel<uint16_t><<<blocks, threads, 0, stream>>>(args); break;
    case 4: strided_copy_kernel<uint32_t><<<blocks, threads, 0, stream>>>(args); break;
    default: strided_copy_kernel<uint64_t><<<blocks, threads, 0, stream>>>(args); break;
  }
  FP8KIT_CHECK_LAUNCH(stream, "strided_copy_kernel");
}

}  // namespace fp8kit::cuda
