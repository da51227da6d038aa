// RMS normalization as vLLM's csrc/layernorm_kernels.cu computes it (rms_norm and
// fused_add_rms_norm, the norms of Llama-family layers). Rows are independent; every step in f32
// with the roundings to the model dtype T named below. Hugging Face's LlamaRMSNorm
// (weight * (x * rsqrt(var + eps)).to(dtype)) rounds at the same places; how the two differ is in
// docs/numerics.md. CPU reference: src/ops/norm/rms_norm_ref.cpp; tests: tests/cpu/test_rms_norm.cpp.
#pragma once

#include "fp8kit/runtime/forward_context.h"
#include "fp8kit/tensor.h"

namespace fp8kit::ops {

// ---------------------------------------------------------------------------------------------
// rms_norm(ctx, x [..., hidden] f32|f16|bf16, weight [hidden] of x's dtype, eps) -> [..., hidden]
//   r = 1 / sqrt(sum_i x_i^2 / hidden + eps)   (computed in double, rounded once to f32)
//   y_i = T(T(x_i * r) * w_i)                  (each product in f32, rounded to T)
// x: last dimension contiguous, leading dimensions that collapse into evenly strided rows (else
// copied once); eps finite and >= 0; out: optional preallocated contiguous output of x's shape.
// ---------------------------------------------------------------------------------------------
Tensor rms_norm(const ForwardContext& ctx, const Tensor& x, const Tensor& weight, float eps, Tensor out = {});

// ---------------------------------------------------------------------------------------------
// fused_add_rms_norm(ctx, x, residual, weight, eps), in place (vLLM's fused_add_rms_norm):
//   residual_i = T(x_i + residual_i)   (the f32 sum rounded to T: the residual stream's next value)
//   x_i        = rms_norm of the rounded residual row, as above
// x: as rms_norm (evenly strided rows, written in place); residual: contiguous, x's shape and
// dtype. The norm reads the rounded residual, as vLLM's CUDA kernel does (its torch-native
// forward normalizes the unrounded f32 sum instead).
// ---------------------------------------------------------------------------------------------
void fused_add_rms_norm(const ForwardContext& ctx, const Tensor& x, const Tensor& residual, const Tensor& weight,
                        float eps);

}  // namespace fp8kit::ops
