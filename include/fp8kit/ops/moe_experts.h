// Fused mixture-of-experts computation (spec 1.10): the gated activations, the top-k sum and
// fused_experts, the pipeline quantize -> grouped GEMM1 -> activation -> quantize -> grouped
// GEMM2 -> weighted sum over the top-k experts. Routes by device: the CPU reference (the
// composition of the quantization, GEMM and activation references, src/ops/moe/) or CUDA
// (fused_experts_cuda.cpp: grouped FP8 GEMMs over the moe_align_block_size segmentation, no host
// synchronization).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "fp8kit/runtime/forward_context.h"
#include "fp8kit/tensor.h"

namespace fp8kit::ops {

// out[t, i] = T(T(act(x[t, i])) * x[t, d + i]) for x [..., 2d] of f32, f16 or bf16 (spec 1.10):
// silu(x) = x / (1 + exp(-x)), gelu(x) = x * 0.5 * (1 + erf(x * M_SQRT1_2)) (the erf form), both
// computed in f32 and rounded to T before the multiply; the product is rounded to T.
// x: last dimension contiguous (other layouts are copied first). out: [..., d] of x's dtype,
// contiguous (preallocated or undefined).
Tensor silu_and_mul(const ForwardContext& ctx, const Tensor& x, Tensor out = {});
Tensor gelu_and_mul(const ForwardContext& ctx, const Tensor& x, Tensor out = {});

// out[m, :] = sum over k of input[m, k, :] (spec 1.10 moe_sum): input [M, topk, D] contiguous,
// out [M, D] contiguous, both f32, f16 or bf16 (the same).
//   topk in {2, 3, 4} (vLLM's own kernel): x = 0; x = T(x + in[k]) for k = 0, 1, ...: a rounding
//     to T after every add.
//   any other topk (vLLM calls at::sum_out): the sum accumulated in f32 in the order k = 0, 1, ...
//     and rounded to T once (torch's order of the f32 adds is unspecified; this one is fixed).
void moe_sum(const ForwardContext& ctx, const Tensor& input, Tensor& out);

struct FusedExpertsOptions {
  bool inplace = false;  // write the result into hidden_states
  std::string activation = "silu";  // "silu" or "gelu"
  bool apply_router_weight_on_input = false;
  // Quantization of the experts. use_fp8_w8a8: FP8 weights and activations. weight_only: FP8
  // weights, 16-bit activations (the Marlin path). Neither: unquantized 16-bit experts.
  bool use_fp8_w8a8 = false;
  bool weight_only = false;
  Tensor w1_scale, w2_scale;  // per-tensor [E] (or [E, 1]); block [E, ceil(N/bn), ceil(K/bk)]
  Tensor a1_scale, a2_scale;  // static activation scales (one element), or undefined: dynamic
  std::optional<std::pair<int64_t, int64_t>> block_shape;  // {bn, bk}
  int64_t global_num_experts = -1;  // -1: w1.size(0)
  Tensor expert_map;                // i32 [global_num_experts]: local expert or -1 (not here)
  int64_t chunk_size = 0;           // tokens per chunk; 0: ctx.overrides().fused_moe_chunk_size
  // FP8 with per-tensor scales on sm_90 prefill (moe_align blocks of 128, i.e. more than 384
  // tokens an expert on average): accumulate the whole K in the tensor cores, as the reference's
  // Triton kernel does (spec 2.3), instead of promoting every 128 of K into f32. Faster (128 x 256
  // tiles; Mixtral-8x7B M = 2048-4096 1.03-1.15x on the H200) and less exact: the FP8 tensor cores
  // keep about 14 bits while they add, so the error grows with K (about 1% relative L2 of the
  // layer's output at K = 4096 / 14336; docs/numerics.md). Also turned on by
  // ctx.overrides().moe_fast_accum (FP8KIT_MOE_FAST_ACCUM=1). The CPU path and the other kernels
  // ignore it.
  bool fast_accum = false;
};

// hidden_states [M, H] f32/f16/bf16, contiguous; w1 [E, 2I, H]; w2 [E, H, I] (last dimensions
// contiguous); topk_weights f32 [M, topk]; topk_ids i32/i64 [M, topk] of global expert ids in
// [0, global_num_experts). E is the number of local experts. Returns [M, H] of hidden_states'
// dtype T (hidden_states itself when inplace).
//
// The tokens are processed in chunks of chunk_size; per chunk (A = the chunk's rows, one slot
// s = (t, k) per routed token, expert e = expert_map[topk_ids[t, k]] or topk_ids[t, k]):
//  1. use_fp8_w8a8: A is quantized to the weights' FP8 dtype: per-tensor weights ->
//     scaled_fp8_quant(A, a1_scale) (static, or ONE dynamic scale over the whole chunk, so the
//     result depends on the chunk's other tokens: spec 2.7); block {bn, bk} ->
//     per_token_group_quant(A, bk), dynamic only. Otherwise A stays as it is.
//  2. C1[s, n] = T(epilogue(acc)), acc = f32 value of sum_h A[t, h] * W1[e, n, h] (the reference
//     sums in double and rounds once), with
//       per-tensor: acc = acc * w; result (acc * a_scale) * w1_scale[e]           (f32, in order)
//       block:      acc = sum over K blocks of (dot_kb * a_s[t, kb]) * b_s[e, n / bn, kb]; acc * w
//       weight-only: W1 dequantized first as f32(decode * scale); acc * w
//       unquantized: acc * w
//     where w = topk_weights[t, k] when apply_router_weight_on_input, else no multiply. A slot
//     whose expert is -1 (not on this rank) gives a zero row.
//  3. C2 = silu_and_mul(C1) or gelu_and_mul(C1) ([M * topk, I], T).
//  4. C2 is quantized like A in step 1, with a2_scale (a dynamic per-tensor scale covers all
//     M * topk rows of the chunk, zero rows of other ranks' experts included).
//  5. C3[s, :] = GEMM2 of C2[s] with W2[e] as in step 2, w = topk_weights[t, k] unless
//     apply_router_weight_on_input.
//  6. out[t, :] = moe_sum(C3 viewed [M, topk, H]); weight-only sums in f32 with one rounding for
//     every topk (the Marlin path's torch.sum).
// With expert parallelism every rank computes its local experts' share; the sum over ranks is
// the single-rank result up to the rounding of the top-k sum (exact when the per-rank partial
// sums are exact), provided the activation scales do not depend on the rank: static scales or
// block (per-row) scales, not dynamic per-tensor scales.
//
// Errors use the spec's texts: "Hidden size mismatch {H} != {w1.size(2)}", "topk shape
// mismatch", "Hidden_states must be contiguous", "Stride of last dimension must be 1",
// "Unsupported FusedMoe activation: {activation}"; other messages start with "fused_experts:".
Tensor fused_experts(const ForwardContext& ctx, const Tensor& hidden_states, const Tensor& w1, const Tensor& w2, const Tensor& topk_weights,
                     const Tensor& topk_ids, const FusedExpertsOptions& options = {});

}  // namespace fp8kit::ops
