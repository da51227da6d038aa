// Argument block of the fused MoE's grouped GEMMs on CUDA (the Triton fused_moe_kernel, spec
// 1.10), filled by fused_experts_cuda.cpp, consumed by grouped_gemm_sm90_wgmma.cu,
// grouped_gemm_sm90_sorted.cu and grouped_gemm_sm90_e4m3.cu (FP8 tensor cores), the weight-only
// kernels of ops/gemm (16-bit tensor cores, through grouped_gemm_dispatch.cpp) and
// grouped_gemm_simt.cu (CUDA cores, every mode). The CPU counterpart is ExpertGemmArgs
// (fused_experts_gemm_ref.h); the epilogue order is the same.
//
// Rows: the moe_align_block_size segmentation. Sorted position p (0 <= p < num_post_pad, read on
// the device) holds slot = sorted_ids[p]; slot >= num_slots is padding. The A row of a slot is
// slot / a_slots_per_row (top_k in GEMM1, 1 in GEMM2); its output row is slot. The expert of
// position p is expert_ids[p / block_m]: -1 writes zeros (an expert of another rank).
#pragma once

#include <cstdint>

#include "fp8kit/dtype.h"
#include "ops/moe/fused_experts_args.h"

namespace fp8kit::ops {

struct GroupedGemmArgs {
  int64_t n = 0, k = 0;
  int64_t num_slots = 0;        // M * top_k of the chunk: sorted ids >= num_slots are padding
  int64_t a_slots_per_row = 1;  // A row = slot / a_slots_per_row
  int64_t block_m = 16;         // moe_align block size; a multiple of 16
  int64_t grid_m_blocks = 0;    // host upper bound on the blocks in use (<= the length of expert_ids)
  const int32_t* sorted_ids = nullptr;  // [max_padded]
  const int32_t* expert_ids = nullptr;  // [max_padded / block_m]
  const int32_t* num_post_pad = nullptr;  // [1]

  const void* a = nullptr;  // [rows, k] of a_dtype, row r at a + r * lda (elements)
  DType a_dtype = DType::kE4M3FN;
  int64_t lda = 0;
  const void* b = nullptr;  // [E, n, k] of b_dtype, b + e * b_expert_stride + row * ldb (elements)
  DType b_dtype = DType::kE4M3FN;
  int64_t b_expert_stride = 0, ldb = 0;
  int64_t num_experts = 0;  // E (the local experts b holds)

  ExpertQuant quant = ExpertQuant::kFp8W8A8;
  bool block = false;  // block scales (kFp8W8A8: activation 1 x block_k and weight block_n x block_k)
  int64_t block_n = 0, block_k = 0;
  const float* a_scale = nullptr;  // kFp8W8A8 per-tensor: [1]; block: [rows, ceil(k / block_k)] row-major
  const float* b_scale = nullptr;  // per-tensor: [E]; block: [E, ceil(n / block_n), ceil(k / block_k)] contiguous
  const float* slot_weight = nullptr;  // [num_slots] routed weights multiplied into acc, or null
  bool fast_accum = false;  // per-tensor, sorted kernel: the whole K in the tensor cores (no promotion)

  void* c = nullptr;  // [num_slots, n] of c_dtype, row `slot` at c + slot * ldc
  DType c_dtype = DType::kBF16;
  int64_t ldc = 0;

  // Split K (grouped_gemm_sm90_wgmma only, block_m 16): with k_splits > 1, split s sums the K tiles
  // [s * q, (s + 1) * q), q = ceil(k tiles / k_splits), applies the epilogue to its partial sum
  // and stores the f32 result at partials[(s * num_slots + slot) * n + col] instead of c; the
  // caller adds the splits in order (moe_sum's `partials`).
  int64_t k_splits = 1;
  float* partials = nullptr;
};

}  // namespace fp8kit::ops
