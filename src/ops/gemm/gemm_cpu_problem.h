// The one problem the fast CPU GEMM engine solves, shared by scaled_mm, weight_only_mm,
// matmul_16bit and the fused MoE's expert GEMMs (each fills it from its own args):
//
//   y[i, j] = final( combine over K chunks c of partial[i, j, c] ),
//   partial[i, j, c] = f32 sum over k in chunk c of A[i, k] * B[j, k]
//
// A and B are read as f32 (FP8 decoded, 16-bit widened; exact). Every kernel family sums a chunk
// in one fixed order (vector lanes over k, then a fixed tree; gemm_cpu_driver.h), so a row's
// result does not depend on M, the thread count or the path (GEMV or panel) that computed it.
// Chunks are block_k long with block scales (the reference's per-block promotion), else
// kGemmCpuChunk. Tested by tests/cpu/test_gemm_cpu*.cpp against the references.
#pragma once

#include <cstdint>

#include "fp8kit/dtype.h"

namespace fp8kit::ops::cpu {

// K chunk of the problems without block scales: partials are summed in f32 in k order within a
// chunk (by lanes), then chunk totals are added in order.
inline constexpr int64_t kGemmCpuChunk = 512;

enum class Operand : uint8_t { kE4M3, kBF16, kF16, kF32 };

// How the partial p of chunk c joins the running total t of (i, j) (ra = A's row index of i;
// sa = block_sa[ra * block_sa_row + c * block_sa_chunk], sb = block_sb[(j / block_n) *
// block_sb_row + c * block_sb_chunk]).
enum class Combine : uint8_t {
  kSum,            // t = t + p
  kScaledMmBlock,  // t = t + (p * sa) * sb            (scaled_mm_ref)
  kMoeBlock,       // t = fmaf(p * sa, sb, t)          (expert_gemm_ref)
  kWeightBlock,    // t = t + p * sb                   (weight-only: the dequantization factored out)
};

// How the total t becomes y[i, j] (ro = the output row of i; rs = row_scale[ra * row_scale_stride],
// cs = col_scale[j * col_scale_stride], a stride of 0 being one scale for all), before the
// rounding to out_dtype. A null pointer leaves its factor out.
enum class Final : uint8_t {
  kScaledMm,  // y = fmaf(rs, cs * t, bias[j])       (scaled_mm_ref with one scale per operand row)
  kScale,     // y = t * cs + bias[j]                (weight-only, 16-bit, block-scaled totals)
  kMoe,       // y = (((t * cs) * row_weight[ro]) * moe_sa) * moe_sb   (expert_gemm_ref)
};

struct GemmProblem {
  int64_t m = 0, n = 0, k = 0;
  // A [m, k]: row i at a + ra * lda elements, ra = a_rows ? a_rows[i] : i.
  const void* a = nullptr;
  Operand a_type = Operand::kE4M3;
  int64_t lda = 0;
  const int32_t* a_rows = nullptr;
  // B [n, k]: row j at b + j * ldb elements.
  const void* b = nullptr;
  Operand b_type = Operand::kE4M3;
  int64_t ldb = 0;

  Combine combine = Combine::kSum;
  int64_t block_n = 1, block_k = 0;  // block combines: chunk c is [c * block_k, (c + 1) * block_k)
  const float* block_sa = nullptr;
  int64_t block_sa_row = 0, block_sa_chunk = 0;
  const float* block_sb = nullptr;
  int64_t block_sb_row = 0, block_sb_chunk = 0;

  Final final = Final::kScale;
  const float* row_scale = nullptr;
  int64_t row_scale_stride = 0;
  const float* col_scale = nullptr;
  int64_t col_scale_stride = 0;
  const float* row_weight = nullptr;  // kMoe: per output row ro
  const float* moe_sa = nullptr;      // kMoe: one element
  const float* moe_sb = nullptr;      // kMoe: one element
  const void* bias = nullptr;         // [n] of out_dtype, or null

  // y [m, n] of out_dtype: row i at out + ro * ldc elements, ro = out_rows ? out_rows[i] : i.
  void* out = nullptr;
  DType out_dtype = DType::kF32;  // f32 | bf16 | f16
  int64_t ldc = 0;
  const int32_t* out_rows = nullptr;

  int64_t chunk() const { return combine == Combine::kSum ? kGemmCpuChunk : block_k; }
  int64_t num_chunks() const { return (k + chunk() - 1) / chunk(); }
};

}  // namespace fp8kit::ops::cpu
