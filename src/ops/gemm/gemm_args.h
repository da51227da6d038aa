// Argument block of scaled_mm: raw pointers, sizes, strides in elements and the scaling, already
// validated by gemm.cpp. The CPU reference (gemm_ref.cpp) and every CUDA backend take this
// struct, so one value drives both in the tests.
#pragma once

#include <cstdint>

#include "fp8kit/dtype.h"
#include "fp8kit/runtime/overrides.h"

namespace fp8kit::ops {

enum class ScaleKind : uint8_t {
  kTensor,   // one value
  kRow,      // one per row of a (per-token) or per row of b (per-channel)
  kBlock,    // a: one per 1 x block_k group; b: one per block_n x block_k block
};

struct ScaledMmArgs {
  int64_t m = 0, n = 0, k = 0;
  const uint8_t* a = nullptr;  // e4m3fn [m, k], element (i, kk) at a[i * lda + kk]
  int64_t lda = 0;
  const uint8_t* b = nullptr;  // e4m3fn [n, k], element (j, kk) at b[j * ldb + kk]
  int64_t ldb = 0;
  const float* scale_a = nullptr;
  ScaleKind scale_a_kind = ScaleKind::kTensor;
  // kBlock: scale of (row i, k-group g) at scale_a[i * sa_row_stride + g * sa_group_stride].
  int64_t sa_row_stride = 0, sa_group_stride = 0;
  const float* scale_b = nullptr;
  ScaleKind scale_b_kind = ScaleKind::kTensor;
  // kBlock: scale of (row block r, k-block g) at scale_b[r * sb_row_stride + g * sb_group_stride].
  int64_t sb_row_stride = 0, sb_group_stride = 0;
  int64_t block_n = 128, block_k = 128;  // kBlock only
  const void* bias = nullptr;            // [n] of out_dtype, or null
  void* out = nullptr;                   // [m, n] of out_dtype, row i at out + i * ldc
  int64_t ldc = 0;
  DType out_dtype = DType::kBF16;        // bf16 | f16 | f32
  bool fast_accum = false;               // ScaledMmOptions::fast_accum (not with kBlock)
  const Overrides* overrides = nullptr;  // the caller's context's (never null from scaled_mm)
  // cuBLASLt's scratch on CUDA: scaled_mm_lt_workspace_bytes(scale_a_kind) bytes from the caller
  // context's Workspace, so two streams never share it and a captured graph keeps its own.
  void* lt_workspace = nullptr;
  int64_t lt_workspace_bytes = 0;
};

// The cuBLASLt scratch of one scaled_mm: block scales plan with 32 MiB, the others within 1 MiB
// (gemm_cublaslt.cu says why).
inline int64_t scaled_mm_lt_workspace_bytes(ScaleKind scale_a_kind) {
  return scale_a_kind == ScaleKind::kBlock ? int64_t(32) << 20 : int64_t(1) << 20;
}

// weight_only_mm: 16-bit activations times dequantized FP8 weights.
struct WeightOnlyMmArgs {
  int64_t m = 0, n = 0, k = 0;
  const void* x = nullptr;  // [m, k] of act_dtype, row i at x + i * ldx
  int64_t ldx = 0;
  DType act_dtype = DType::kBF16;  // bf16 | f16; also the dtype of bias and out
  const uint8_t* w = nullptr;      // e4m3fn [n, k], row j at w + j * ldw
  int64_t ldw = 0;
  const float* scale = nullptr;
  ScaleKind scale_kind = ScaleKind::kTensor;  // kTensor, kRow (per output channel) or kBlock
  int64_t s_row_stride = 0, s_col_stride = 0;  // kBlock: scale of block (r, c) at r * s_row_stride + c * s_col_stride
  int64_t block_n = 128, block_k = 128;
  const void* bias = nullptr;  // [n] of act_dtype, or null
  void* out = nullptr;         // [m, n] of act_dtype, row i at out + i * ldc
  int64_t ldc = 0;
  const Overrides* overrides = nullptr;  // the caller's context's (never null from weight_only_mm)
};

}  // namespace fp8kit::ops
