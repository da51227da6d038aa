// The CUDA entry of scaled_mm: GemmDesc -> GemmConfig (gemm_config.h), then the chosen backend;
// when cuBLASLt finds no algorithm at run time, the generic kernel serves the problem.
#include <cuda_runtime_api.h>

#include "core/cuda/cuda_check.h"
#include "ops/gemm/gemm_config.h"
#include "ops/gemm/gemm_cublaslt.h"
#include "ops/gemm/gemm_cuda.h"
#include "ops/gemm/gemm_fallback.h"

namespace fp8kit::ops {
namespace {

int current_arch() {
  int device = 0, major = 0, minor = 0;
  FP8KIT_CUDA_CHECK(cudaGetDevice(&device));
  FP8KIT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  FP8KIT_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return major * 10 + minor;
}

}  // namespace

void scaled_mm_cuda(const ScaledMmArgs& args, Stream stream) {
  const cudaStream_t s = static_cast<cudaStream_t>(stream.handle);
  const GemmConfig config = select_gemm(describe(args, current_arch()));
  if (config.backend == GemmBackend::kCublasLt && scaled_mm_cublaslt(args, s)) return;
  scaled_mm_fallback(args, s);
}

}  // namespace fp8kit::ops
