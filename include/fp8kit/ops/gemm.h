// FP8 GEMM: scaled_mm, the one entry point behind every FP8 linear layer (spec 1.4, 1.5, 1.7,
// 2.3). Routes by device: the CPU reference (src/ops/gemm/gemm_ref.cpp, the executable spec) or
// the CUDA backends (cuBLASLt and fp8kit's own sm_90a kernels, chosen per shape).
//
//   y[M, N] = round_out( sa * round32(sb * acc) + bias ),  acc = sum_k a[m, k] * b[n, k]
//
// a: [M, K] e4m3fn, row-major (K contiguous).
// b: [N, K] e4m3fn with K contiguous (the checkpoint layout), or the [K, N] column-major view of
//    it that the spec's Fp8LinearMethod keeps after loading (weight.t(), strides (1, K)).
// Scalings (f32 scales; scale tensors contiguous unless noted):
//   per-tensor  x per-tensor   scale_a: one element;           scale_b: one element
//   per-token   x per-tensor   scale_a: [M] or [M, 1];         scale_b: one element
//   per-tensor  x per-channel  scale_a: one element;           scale_b: [N], [N, 1] or [1, N]
//   per-token   x per-channel  scale_a: [M] or [M, 1];         scale_b: [N], [N, 1] or [1, N]
//   block (options.block = {bn, bk}): scale_a [M, K/bk] per 1 x bk group of a row (row-major,
//       column-major, or column-major with a padded leading dimension, as per_token_group_quant
//       writes it); scale_b [ceil(N/bn), ceil(K/bk)] per bn x bk block of b. K must divide by bk.
//       acc is promoted per K-block: y = round_out( sum_kb (A_kb . B_kb) * sa[m, kb] * sb[n/bn, kb]
//       + bias ), the FP32 promotion DeepSeek-V3 and DeepGEMM use (FP8 tensor-core accumulators
//       keep ~14 bits).
// bias: [N] of out_dtype (the CUTLASS rule), or undefined.
// out_dtype: bf16, f16 or f32. M, N, K of any size >= 1 (ragged tails are handled).
#pragma once

#include <cstdint>
#include <optional>
#include <utility>

#include "fp8kit/runtime/forward_context.h"
#include "fp8kit/tensor.h"

namespace fp8kit::ops {

struct ScaledMmOptions {
  Tensor bias;
  DType out_dtype = DType::kBF16;
  std::optional<std::pair<int64_t, int64_t>> block;  // {block_n, block_k}: block scaling
  Tensor output;                                      // preallocated [M, N] of out_dtype, contiguous
  // Per-tensor / per-token / per-channel scales on CUDA: acc accumulates the whole K in the FP8
  // tensor cores without promotion into f32 (torch._scaled_mm's use_fast_accum; the FastAccum
  // kernels of vLLM's CUTLASS FP8 path). Faster, and less exact: the tensor cores keep about 14
  // bits while they add, so the error grows with K (docs/numerics.md). Block scales are promoted
  // per K block regardless; the CPU reference ignores it.
  bool fast_accum = false;
};

// On CUDA the backend is plan_scaled_mm(desc, ctx.overrides())'s choice (src/ops/gemm/gemm_config.h);
// the work is queued on ctx.stream().
Tensor scaled_mm(const ForwardContext& ctx, const Tensor& a, const Tensor& b, const Tensor& scale_a, const Tensor& scale_b,
                 const ScaledMmOptions& options = {});

// Weight-only FP8 (W8A16: the spec's Marlin path, for GPUs without FP8 tensor cores, and forced
// with FP8KIT_FORCE_WEIGHT_ONLY=1 by the layers): activations stay 16-bit, weights are FP8 and
// dequantized on the fly.
//   y[M, N] = round_out( float(sum_k x[m, k] * w_dq[n, k]) + bias ),  w_dq = float(decode(w) * s_w)
// x: [M, K] bf16 or f16, K contiguous; the output and bias have x's dtype.
// w: [N, K] e4m3fn with K contiguous, or its [K, N] column-major view.
// w_scale (f32): one element (per-tensor), [N] / [N, 1] (per-channel), or with options.block =
//   {bn, bk} the [ceil(N/bn), ceil(K/bk)] block scales of the checkpoint.
struct WeightOnlyMmOptions {
  Tensor bias;
  std::optional<std::pair<int64_t, int64_t>> block;
  Tensor output;
};

Tensor weight_only_mm(const ForwardContext& ctx, const Tensor& x, const Tensor& w, const Tensor& w_scale, const WeightOnlyMmOptions& options = {});

// 16-bit GEMM of unquantized linear layers (UnquantizedLinearMethod):
//   y[M, N] = round_out( sum_k x[m, k] * w[n, k] + bias[n] )
// x: [M, K] bf16, f16 or f32 with K contiguous (any row stride); w: [N, K] of x's dtype with K
// contiguous; bias: [N] of x's dtype, or undefined; y: contiguous [M, N] of x's dtype. The CPU
// reference sums in double and rounds once; CUDA uses cuBLASLt (f32 accumulation) when the
// operands are 16-byte aligned, else a CUDA-core kernel with f32 accumulation.
Tensor matmul_16bit(const ForwardContext& ctx, const Tensor& x, const Tensor& w, const Tensor& bias);

}  // namespace fp8kit::ops
