// Grouped GEMM kernel and block-size choice (grouped_gemm_dispatch.h).
#if FP8KIT_WITH_CUDA

#include "ops/moe/grouped_gemm_dispatch.h"

#include "core/check.h"
#include "core/cuda/cuda_check.h"
#include "ops/gemm/gemm_config.h"
#include "ops/gemm/weight_only_mma.h"
#include "ops/moe/grouped_gemm_cuda.h"

namespace fp8kit::ops {

GroupedKernel preferred_grouped_kernel(ExpertQuant quant, int device, const Overrides& overrides) {
  int major = 0, minor = 0;
  FP8KIT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  FP8KIT_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return choose_grouped_kernel(quant, 10 * major + minor, overrides.moe_gemm);
}

int64_t grouped_block_m(int64_t slots, int64_t global_num_experts, GroupedKernel kernel, const Overrides& overrides) {
  return choose_grouped_block_m(slots, global_num_experts, kernel, overrides.moe_block_m);
}

namespace {

// Weight-only experts on the 16-bit tensor-core kernels, where they serve (FP8 weights, 16-bit
// activations and output): blocks of 16 on the streaming kernel (decode), of 128 on the tiled
// one; false leaves the GEMM to CUDA cores.
bool run_weight_only(const GroupedGemmArgs& g, int device, cudaStream_t stream) {
  const bool act16 = g.a_dtype == DType::kBF16 || g.a_dtype == DType::kF16;
  const bool streaming = g.block_m == kWeightOnlyMmaSortedBlock;
  if (g.quant != ExpertQuant::kWeightOnly || (!streaming && g.block_m != kWeightOnlyTileM) ||
      g.b_dtype != DType::kE4M3FN || !act16 || g.c_dtype != g.a_dtype) {
    return false;
  }
  WeightOnlyMmArgs w;
  w.m = g.grid_m_blocks * g.block_m;
  w.n = g.n;
  w.k = g.k;
  w.x = g.a;
  w.ldx = g.lda;
  w.act_dtype = g.a_dtype;
  w.w = static_cast<const uint8_t*>(g.b);
  w.ldw = g.ldb;
  w.scale = g.b_scale;
  w.scale_kind = g.block ? ScaleKind::kBlock : ScaleKind::kTensor;
  const int64_t k_blocks = g.block ? (g.k + g.block_k - 1) / g.block_k : 1;
  const int64_t n_blocks = g.block ? (g.n + g.block_n - 1) / g.block_n : 1;
  if (g.block) {
    w.block_n = g.block_n;
    w.block_k = g.block_k;
    w.s_row_stride = k_blocks;  // [E, N / block_n, K / block_k] contiguous
    w.s_col_stride = 1;
  }
  w.out = g.c;
  w.ldc = g.ldc;
  if (w.m <= 0 || !(streaming ? weight_only_mma_sorted_serves(w, device) : weight_only_tiled_serves(w, device))) {
    return false;
  }
  W8A16SortedRows rows;
  rows.sorted_ids = g.sorted_ids;
  rows.expert_ids = g.expert_ids;
  rows.num_post_pad = g.num_post_pad;
  rows.num_slots = g.num_slots;
  rows.a_slots_per_row = g.a_slots_per_row;
  rows.w_expert_stride = g.b_expert_stride;
  rows.scale_expert_stride = n_blocks * k_blocks;
  rows.slot_weight = g.slot_weight;
  if (streaming) {
    weight_only_mma_sorted_cuda(w, rows, stream);
  } else {
    weight_only_tiled_sorted_cuda(w, rows, stream);
  }
  return true;
}

}  // namespace

void run_grouped_gemm(const GroupedGemmArgs& g, GroupedKernel kernel, int device, cudaStream_t stream) {
  FP8KIT_CHECK(g.block_m % 16 == 0 && g.lda >= g.k && g.ldb >= g.k && g.ldc >= g.n, ErrorCode::kInternal,
               "fused_experts: grouped GEMM arguments out of shape");
  const bool wgmma = kernel == GroupedKernel::kWgmma && grouped_gemm_sm90_wgmma_rejects(g, device).empty();
  FP8KIT_CHECK(g.k_splits == 1 || wgmma, ErrorCode::kInternal, "fused_experts: split K needs the wgmma grouped GEMM");
  if (kernel == GroupedKernel::kW8A16 && run_weight_only(g, device, stream)) return;
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
