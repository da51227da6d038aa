// sm90_e4m3_gemm_wgmma: scaled_mm on the Hopper wgmma kernel (sm90_e4m3_gemm_wgmma_kernel.cuh,
// where its design and measurements are described): one launch of the persistent grid that
// plan_wgmma_gemm sizes, a and b as 2-D TMA maps read in 128 x 128 boxes.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/cuda/cuda_check.h"
#include "core/cuda/kernel_attributes.h"
#include "core/cuda/tensor_map.h"
#include "fp8kit/half.h"
#include "ops/gemm/sm90_e4m3_gemm_wgmma.h"
#include "ops/gemm/sm90_e4m3_gemm_wgmma_kernel.cuh"

namespace fp8kit::ops {
namespace {

// kFast: ScaledMmArgs::fast_accum, 128 x 256 tiles with the whole K in the tensor cores.
// kTmaStore: the epilogue stores by TMA (any output whose rows the TMA can address).
template <bool kBlock, typename OutT, bool kFast, bool kTmaStore>
void launch_kernel(const ScaledMmArgs& g, const WgmmaGemmPlan& plan, const CUtensorMap& c_map, cudaStream_t stream) {
  constexpr int kBN = kFast ? 256 : 128;
  using T = sm90_gemm::Traits<kBlock, 128, kBN>;
  constexpr auto kernel = sm90_gemm::sm90_e4m3_gemm_wgmma_kernel<kBlock, OutT, false, 128, kBN, kFast, kTmaStore>;
  cuda::allow_dynamic_smem<kernel>(T::kSmemBytes);
  // a [M, K] and b [N, K] as bytes, read in 128 x 128 and kBN x 128 boxes.
  const CUtensorMap a_map = cuda::make_tensor_map_3d_u8_sw128(g.a, uint64_t(g.k), uint64_t(g.m), 1, uint64_t(g.lda),
                                                              uint64_t(g.lda) * uint64_t(g.m), T::kBK, T::kBM);
  const CUtensorMap b_map = cuda::make_tensor_map_3d_u8_sw128(g.b, uint64_t(g.k), uint64_t(g.n), 1, uint64_t(g.ldb),
                                                              uint64_t(g.ldb) * uint64_t(g.n), T::kBK, T::kBN);
  kernel<<<unsigned(plan.ctas), T::kThreads, T::kSmemBytes, stream>>>(g, sm90_gemm::SortedRows{}, a_map, b_map, c_map);
  FP8KIT_CHECK_LAUNCH(stream, "sm90_e4m3_gemm_wgmma_kernel");
}

template <bool kBlock, typename OutT, bool kFast>
void launch(const ScaledMmArgs& g, const WgmmaGemmPlan& plan, cudaStream_t stream) {
  const sm90_gemm::OutputMap c = sm90_gemm::make_output_map<OutT>(g.out, g.m, g.n, g.ldc);
  c.ok ? launch_kernel<kBlock, OutT, kFast, true>(g, plan, c.map, stream)
       : launch_kernel<kBlock, OutT, kFast, false>(g, plan, c.map, stream);
}

template <bool kBlock, bool kFast>
void launch_out(const ScaledMmArgs& g, const WgmmaGemmPlan& plan, cudaStream_t stream) {
  switch (g.out_dtype) {
    case DType::kBF16: launch<kBlock, BFloat16, !kBlock && kFast>(g, plan, stream); break;
    case DType::kF16: launch<kBlock, Float16, !kBlock && kFast>(g, plan, stream); break;
    default: launch<kBlock, float, !kBlock && kFast>(g, plan, stream); break;
  }
}

}  // namespace

void sm90_e4m3_gemm_wgmma(const ScaledMmArgs& args, const WgmmaGemmPlan& plan, cudaStream_t stream) {
  if (args.m <= 0 || args.n <= 0) return;
  if (args.scale_a_kind == ScaleKind::kBlock) {
    launch_out<true, false>(args, plan, stream);
  } else if (args.fast_accum) {
    launch_out<false, true>(args, plan, stream);
  } else {
    launch_out<false, false>(args, plan, stream);
  }
}

}  // namespace fp8kit::ops
