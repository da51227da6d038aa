// The fused MoE's prefill GEMMs on expert-sorted rows (grouped_gemm_sm90_sorted.cu): GEMM1 reads
// its activation rows gathered into moe_align_block_size's order (block 64 or 128) and writes the
// intermediate in that order; the activation and its quantization run on the sorted rows; GEMM2
// reads them by TMA and writes its rows in the same order, which moe_sum reads by slot through
// row_of_slot (so that both GEMMs store whole tiles by TMA). Used by fused_experts_cuda.cpp on sm_90.
#pragma once

#include <cstdint>
#include <string>

#include <cuda_runtime_api.h>

#include "ops/moe/grouped_gemm_args.h"

namespace fp8kit::ops {

// An empty string when the sorted GEMM can run `g` (a's rows sorted, block_m 64 or 128) on `device`,
// else why not (fused_experts then keeps the gathering kernels).
std::string grouped_gemm_sm90_sorted_rejects(const GroupedGemmArgs& g, int device);

// `g` with a's row p = sorted position p (g.a_slots_per_row unused), read for p < *num_post_pad
// only, and output row p likewise (zeros where no slot is; rows past them are not written). The
// routed weight (g.slot_weight) is that of the slot sorted_ids[p].
void grouped_gemm_sm90_sorted(const GroupedGemmArgs& g, cudaStream_t stream);

// out[p] = x[sorted_ids[p] / slots_per_row] (k bytes) for p < min(*num_post_pad, rows) holding a
// slot, zeros for the padding among them; rows past them are not written. scale_out likewise from
// scale ([rows of x, groups] f32) when given; row_of_slot[sorted_ids[p]] = p when given (slots
// in no such position keep what it held).
struct SortedGather {
  int64_t rows = 0, k = 0, num_slots = 0, slots_per_row = 1, groups = 0;
  const int32_t* sorted_ids = nullptr;
  const int32_t* num_post_pad = nullptr;
  const uint8_t* x = nullptr;  // [., k] bytes, rows 16-byte aligned
  int64_t ldx = 0;
  uint8_t* out = nullptr;  // [rows, k]
  int64_t ldo = 0;
  const float* scale = nullptr;
  float* scale_out = nullptr;  // [rows, groups]
  int32_t* row_of_slot = nullptr;  // [num_slots]
};
void gather_sorted_rows(const SortedGather& a, cudaStream_t stream);

}  // namespace fp8kit::ops
