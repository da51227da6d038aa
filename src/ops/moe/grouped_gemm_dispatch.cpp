// Grouped GEMM kernel and block-size choice (grouped_gemm_dispatch.h).
#if FP8KIT_WITH_CUDA

#include "ops/moe/grouped_gemm_dispatch.h"

#include <cstdlib>
#include <string_view>

#include "core/check.h"
#include "core/cuda/cuda_check.h"
#include "ops/moe/grouped_gemm_cuda.h"

namespace fp8kit::ops {
namespace {

bool env_is(const char* name, std::string_view value) {
  const char* v = std::getenv(name);
  return v != nullptr && std::string_view(v) == value;
}

}  // namespace

GroupedKernel preferred_grouped_kernel(ExpertQuant quant, int device) {
  if (env_is("FP8KIT_MOE_GEMM", "simt") || quant != ExpertQuant::kFp8W8A8) return GroupedKernel::kSimt;
  if (env_is("FP8KIT_MOE_GEMM", "mma")) return GroupedKernel::kMma;
  int major = 0, minor = 0;
  FP8KIT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  FP8KIT_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return major == 9 && minor == 0 ? GroupedKernel::kWgmma : GroupedKernel::kMma;
}

// The wgmma kernel re-reads an expert's weight tile once per block, so its blocks grow with the
// tokens an expert sees on average: 16 at decode, 64 in between, 128 at prefill. The mma.sync and
// CUDA-core kernels tile 16 or 64.
int64_t grouped_block_m(int64_t slots, int64_t global_num_experts, GroupedKernel kernel) {
  for (const char* forced : {"16", "64", "128"}) {
    if (env_is("FP8KIT_MOE_BLOCK_M", forced)) return std::atoll(forced);
  }
  if (kernel != GroupedKernel::kWgmma) return slots <= 32 * global_num_experts ? 16 : 64;
  if (slots <= 24 * global_num_experts) return 16;
  return slots <= 96 * global_num_experts ? 64 : 128;
}

void run_grouped_gemm(const GroupedGemmArgs& g, GroupedKernel kernel, int device, cudaStream_t stream) {
  FP8KIT_CHECK(g.block_m % 16 == 0 && g.lda >= g.k && g.ldb >= g.k && g.ldc >= g.n, ErrorCode::kInternal,
               "fused_experts: grouped GEMM arguments out of shape");
  if (kernel == GroupedKernel::kWgmma && grouped_gemm_sm90_wgmma_rejects(g, device).empty()) {
    grouped_gemm_sm90_wgmma(g, stream);
  } else if (kernel != GroupedKernel::kSimt && grouped_gemm_sm90_e4m3_rejects(g, device).empty()) {
    grouped_gemm_sm90_e4m3(g, stream);
  } else {
    grouped_gemm_simt(g, stream);
  }
}

}  // namespace fp8kit::ops

#endif  // FP8KIT_WITH_CUDA
