// FP8 quantization ops (spec: SEMANTICS.md 1.6, 1.11, 2.2). Every op routes by the device of its
// input; the CPU reference (src/ops/quant/quant_ref.cpp) is the executable spec, and a CUDA
// build's kernels are bit-exact with it. Scales are dequantization multipliers everywhere:
// x ~= q * scale. FP8_MAX below is fp8_quant_max(out_dtype): 448 for e4m3fn, 224 for e4m3fnuz.
// cvt(v) rounds to nearest even (fp8.h); clamp(v) = fmaxf(-FP8_MAX, fminf(v, FP8_MAX)), which
// sends NaN to +FP8_MAX. Every op takes the ForwardContext of the caller first: on a CUDA device
// the work is queued on ctx.stream() and nothing waits for it; the returned tensors are ready in
// stream order. The context's device must be the inputs' device.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "fp8kit/runtime/forward_context.h"
#include "fp8kit/tensor.h"

namespace fp8kit::ops {

// The largest magnitude the quantization ops produce: 448 (e4m3fn) or 224 (e4m3fnuz, as vLLM's
// kernels; torch.finfo says 240). Throws kInvalidArgument for other dtypes.
float fp8_quant_max(DType fp8_dtype);
// The floor of dynamic per-token scales: 1 / (FP8_MAX * 512).
float fp8_min_scaling_factor(DType fp8_dtype);

struct QuantResult {
  Tensor q;      // FP8 values
  Tensor scale;  // f32 dequantization scales
};

// ---------------------------------------------------------------------------------------------
// scaled_fp8_quant(input [M, K] f32|f16|bf16, last dimension contiguous, any row stride)
//   static (options.scale given, f32, one element s):
//       q = cvt(clamp(x * (1.0f / s)));                   scale returned as given
//   dynamic per-tensor (default):
//       s = fl(max|x| / FP8_MAX) (no floor; NaN ignored); q as static;  scale: f32 [1]
//   A per-tensor scale of exactly 0 (static, or an all-zero input) gives zero codes, where the
//   reference computes 0 * inf = NaN and writes FP8_MAX everywhere (spec 2.9 H2; docs/compat.md).
//   dynamic per-token (use_per_token_if_dynamic):
//       t = max_k |x[m, k]|; t = fminf(t, ub) if scale_ub; s[m] = fmaxf(t / FP8_MAX, min_scaling_factor)
//       q = cvt(clamp(x / s[m]))  (true division);        scale: f32 [M_out, 1]
// num_token_padding: the output has max(num_token_padding, M) rows (M_out), in every mode (the
// reference's snapshot refuses it with a static scale: spec 2.9 H1); the extra rows of q are
// zeros and extra per-token scales are 1 (the reference leaves them uninitialised).
// output: a preallocated contiguous [M, K] tensor of out_dtype (not with num_token_padding).
// scale_ub is an error outside dynamic per-token mode (the reference silently ignores it; cf. H9).
// ---------------------------------------------------------------------------------------------
struct ScaledFp8QuantOptions {
  Tensor scale;                              // static scale; undefined: dynamic
  std::optional<int64_t> num_token_padding;  // pad the output to at least this many rows
  Tensor scale_ub;                           // f32, one element: upper bound of per-token scales' absmax
  bool use_per_token_if_dynamic = false;
  Tensor output;                     // preallocated output
  DType out_dtype = DType::kE4M3FN;  // e4m3fn or e4m3fnuz
};
QuantResult scaled_fp8_quant(const ForwardContext& ctx, const Tensor& input, const ScaledFp8QuantOptions& options = {});

// ---------------------------------------------------------------------------------------------
// per_token_group_quant(x [..., K] f32|f16|bf16, last dimension contiguous), groups of
// group_size consecutive elements of a row (1 x group_size activation blocks):
//   s = fmaxf(max|x_group|, eps) / FP8_MAX;   with use_ue8m0: s = 2^ceil(log2(s)) (exact, from the bits)
//   q = cvt(clamp(x / s))
// scale: f32 [..., K / group_size], row-major; with column_major_scales (2-D x of M rows) shape
// [M, K / g] stored column-major (strides (1, M)), the layout block GEMMs consume. With
// tma_aligned_scales as well, each column is padded to M_pad = ceil(M / 4) * 4 floats (16 bytes,
// DeepGEMM's get_col_major_tma_aligned_tensor): storage [K / g, M_pad], strides (1, M_pad); the
// padding floats are left unwritten.
// eps must be positive and finite. Leading dimensions that do not collapse into evenly strided
// rows are copied first.
// Errors (spec texts): "the last dimension of `x` {K} must be divisible by `group_size` {g}",
// "`x` groups must be contiguous".
// ---------------------------------------------------------------------------------------------
struct PerTokenGroupQuantOptions {
  int64_t group_size = 128;
  float eps = 1e-10f;
  DType out_dtype = DType::kE4M3FN;
  bool column_major_scales = false;
  bool tma_aligned_scales = false;  // only with column_major_scales
  bool use_ue8m0 = false;
  Tensor output;  // preallocated q, contiguous, same shape as x
};
QuantResult per_token_group_quant(const ForwardContext& ctx, const Tensor& x, const PerTokenGroupQuantOptions& options = {});

// ---------------------------------------------------------------------------------------------
// Weight quantization: what a checkpoint producer does (the inverse of what checkpoints store).
// w [N, K] f32|f16|bf16 (2-D, any strides). amax over the group; zero groups get the smallest
// normal float as scale (so q = 0 and every stored scale is positive and finite):
//   s = fmaxf(amax / FP8_MAX, FLT_MIN);  with ue8m0_scales: s = 2^ceil(log2(s))
//   per-tensor:  q = cvt(clamp(w * (1.0f / s)))   scale: f32 0-dim   (the spec's rule 2 / AutoFP8)
//   per-channel: q = cvt(clamp(w / s[n]))         scale: f32 [N, 1]  (one scale per output row)
//   block:       q = cvt(clamp(w / s[bn, bk]))    scale: f32 [ceil(N/block_n), ceil(K/block_k)]
//                partial edge blocks take the amax of their valid elements (DeepSeek-V3's rule)
// ---------------------------------------------------------------------------------------------
struct WeightQuantOptions {
  DType out_dtype = DType::kE4M3FN;
  bool ue8m0_scales = false;  // power-of-two scales (DeepSeek V3.1 "scale_fmt": "ue8m0")
};
QuantResult quantize_weight_per_tensor(const ForwardContext& ctx, const Tensor& w, const WeightQuantOptions& options = {});
QuantResult quantize_weight_per_channel(const ForwardContext& ctx, const Tensor& w,
                                        const WeightQuantOptions& options = {});
QuantResult quantize_weight_block(const ForwardContext& ctx, const Tensor& w, int64_t block_n, int64_t block_k,
                                  const WeightQuantOptions& options = {});

// Dequantizes q [N, K] (any FP8 dtype, any strides) with scales of f32, f16, bf16 or ue8m0
// (widened exactly to f32; any strides):
//   scale with one element: per tensor; [N] or [N, 1]: per row; otherwise 2-D blocks of
//   block = {block_n, block_k} with scale shape [ceil(N/bn), ceil(K/bk)].
//   w = round_out(decode(q) * s), computed in f32 and rounded once to out_dtype (f32|f16|bf16).
Tensor dequantize_weight(const ForwardContext& ctx, const Tensor& q, const Tensor& scale, DType out_dtype,
                         std::optional<std::pair<int64_t, int64_t>> block = std::nullopt);

// per_tensor_dequantize(t, inv_scale): f16(float(f16(t)) * s) for t of any FP8 dtype and shape
// and a one-element f32 scale; the result is a contiguous f16 tensor of t's shape (spec 1.11:
// torch's fp16 tensor times a 0-dim f32 scale). FP8 values are exact in f16.
Tensor per_tensor_dequantize(const ForwardContext& ctx, const Tensor& q, const Tensor& scale);

// requantize_with_max_scale(weight [N, K] e4m3fn|e4m3fnuz, weight_scale f32 [S], logical_widths
// summing to N): s_max = max(weight_scale). If weight_scale[S-1] > -448 (every shard was loaded;
// the not-loaded sentinel is -FLT_MAX), each shard i's rows are requantized in place:
//   q = cvt(clamp(float(f16(float(q) * s_i)) * (1.0f / s_max)))      (the fp16 step of spec 2.2 rule 6)
// Otherwise (fused on disk) the weight is left alone. Returns the 0-dim s_max and the weight.
// s_max is NaN when a scale is NaN (torch.max); s_max == 0 gives zero codes (as H2 above).
struct RequantizeResult {
  Tensor max_scale;  // f32, 0-dim
  Tensor weight;     // the input weight tensor, modified in place
};
// On CUDA the scales stay on the device: the kernel reads them (and the not-loaded test) itself.
RequantizeResult requantize_with_max_scale(const ForwardContext& ctx, const Tensor& weight, const Tensor& weight_scale,
                                           const std::vector<int64_t>& logical_widths);

// normalize_e4m3fn_to_e4m3fnuz: bytes 0x80 (-0 in fn, NaN in fnuz) become 0x00, the bits are
// reinterpreted as e4m3fnuz (half the value), and the scales are doubled. New tensors returned.
struct FnuzResult {
  Tensor weight;        // e4m3fnuz
  Tensor weight_scale;  // weight_scale * 2
  Tensor input_scale;   // input_scale * 2, undefined when none was given
};
FnuzResult normalize_e4m3fn_to_e4m3fnuz(const ForwardContext& ctx, const Tensor& weight, const Tensor& weight_scale,
                                        const Tensor& input_scale = {});

}  // namespace fp8kit::ops
