// fp8_linear: the FP8 linear layer's forward as one call (spec 1.4, 1.5): quantize the 16-bit
// activations as the weight's scheme asks, then scaled_mm, with bias and the model's output
// dtype. x may have any leading dimensions ([..., K]); the result is [..., N].
//
//   activation                 quantization of x                       GEMM scaling
//   kDynamicPerToken           scaled_fp8_quant per token (scale_ub)   per-token x weight's
//   kDynamicPerTensor          scaled_fp8_quant dynamic per-tensor     per-tensor x weight's
//   kStatic                    scaled_fp8_quant with input_scale       per-tensor x weight's
//   kGroup (block weights)     per_token_group_quant 1 x block_k       block
//
// The quantized activations go straight into the GEMM (no copy, no host synchronization; the
// activation buffer and its scales come from ctx.workspace()). A dynamic per-tensor scale needs every
// element before the first product, so that scheme is two passes by nature.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>

#include "fp8kit/runtime/forward_context.h"
#include "fp8kit/tensor.h"

namespace fp8kit::ops {

enum class ActivationQuant : uint8_t { kDynamicPerToken, kDynamicPerTensor, kStatic, kGroup };

struct Fp8LinearOptions {
  ActivationQuant activation = ActivationQuant::kDynamicPerToken;
  Tensor input_scale;     // kStatic: f32, one element
  Tensor input_scale_ub;  // kDynamicPerToken: optional upper bound of the token absmax
  // kGroup: the weight's {block_n, block_k}; activations are grouped by block_k.
  std::optional<std::pair<int64_t, int64_t>> weight_block;
  Tensor bias;                     // [N] of out_dtype
  DType out_dtype = DType::kBF16;  // the model dtype
};

// weight: [N, K] e4m3fn (or its [K, N] column-major view); weight_scale: one element, [N] per
// channel, or [ceil(N/bn), ceil(K/bk)] with kGroup.
Tensor fp8_linear(const ForwardContext& ctx, const Tensor& x, const Tensor& weight, const Tensor& weight_scale, const Fp8LinearOptions& options);

}  // namespace fp8kit::ops
