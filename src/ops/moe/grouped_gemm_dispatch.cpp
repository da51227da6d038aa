// Grouped GEMM kernel and block-size choice (grouped_gemm_dispatch.h).
#if FP8KIT_WITH_CUDA

#include "ops/moe/grouped_gemm_dispatch.h"

#include <cstdlib>

#include "core/check.h"
#include "core/cuda/cuda_check.h"
#include "ops/moe/grouped_gemm_cuda.h"

namespace fp8kit::ops {

GroupedKernel preferred_grouped_kernel(ExpertQuant quant, int device) {
  int major = 0, minor = 0;
  FP8KIT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  FP8KIT_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return choose_grouped_kernel(quant, 10 * major + minor, std::getenv("FP8KIT_MOE_GEMM"));
}

int64_t grouped_block_m(int64_t slots, int64_t global_num_experts, GroupedKernel kernel) {
  return choose_grouped_block_m(slots, global_num_experts, kernel, std::getenv("FP8KIT_MOE_BLOCK_M"));
}

void run_grouped_gemm(const GroupedGemmArgs& g, GroupedKernel kernel, int device, cudaStream_t stream) {
  FP8KIT_CHECK(g.block_m % 16 == 0 && g.lda >= g.k && g.ldb >= g.k && g.ldc >= g.n, ErrorCode::kInternal,
               "fused_experts: grouped GEMM arguments out of shape");
  const bool wgmma = kernel == GroupedKernel::kWgmma && grouped_gemm_sm90_wgmma_rejects(g, device).empty();
  FP8KIT_CHECK(g.k_splits == 1 || wgmma, ErrorCode::kInternal, "fused_experts: split K needs the wgmma grouped GEMM");
  if (wgmma) {
    grouped_gemm_sm90_wgmma(g, stream);
  } else if (kernel != GroupedKernel::kSimt && grouped_gemm_sm90_e4m3_rejects(g, device).empty()) {
    grouped_gemm_sm90_e4m3(g, stream);
  } else {
    grouped_gemm_simt(g, stream);
  }
}

}  // namespace fp8kit::ops

#endif  // FP8KIT_WITH_CUDA
