// The CUDA entry of scaled_mm: GemmDesc -> GemmConfig (gemm_config.h), then the chosen backend;
// when cuBLASLt finds no algorithm at run time, the generic kernel serves the problem.
#include <cuda_runtime_api.h>

#include "core/cuda/cuda_check.h"
#include "fp8kit/tensor.h"
#include "ops/gemm/gemm_config.h"
#include "ops/gemm/gemm_cublaslt.h"
#include "ops/gemm/gemm_cuda.h"
#include "ops/gemm/gemm_fallback.h"

namespace fp8kit::ops {
namespace {

int current_device() {
  int device = 0;
  FP8KIT_CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

int current_arch() {
  int major = 0, minor = 0;
  const int device = current_device();
  FP8KIT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  FP8KIT_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return major * 10 + minor;
}

}  // namespace

void scaled_mm_cuda(const ScaledMmArgs& args, Stream stream) {
  const cudaStream_t s = static_cast<cudaStream_t>(stream.handle);
  const GemmConfig config = select_gemm(describe(args, current_arch()));
  if (config.backend == GemmBackend::kCublasLt) {
    ScaledMmArgs compact = args;
    Tensor compact_scales;
    if (args.scale_a_kind == ScaleKind::kBlock && args.sa_group_stride != args.m) {
      // TMA-aligned activation scales [K/bk, M_pad]: cuBLASLt reads [K/bk, M] without padding.
      const int64_t groups = args.k / args.block_k;
      compact_scales = Tensor::empty({groups, args.m}, DType::kF32, Device::cuda(current_device()));
      FP8KIT_CUDA_CHECK(cudaMemcpy2DAsync(compact_scales.data_ptr(), size_t(args.m) * sizeof(float), args.scale_a,
                                          size_t(args.sa_group_stride) * sizeof(float), size_t(args.m) * sizeof(float),
                                          size_t(groups), cudaMemcpyDeviceToDevice, s));
      compact.scale_a = static_cast<const float*>(compact_scales.data_ptr());
      compact.sa_group_stride = args.m;
    }
    if (scaled_mm_cublaslt(compact, s)) return;
  }
  scaled_mm_fallback(args, s);
}

}  // namespace fp8kit::ops
