// fp8_linear (include/fp8kit/ops/linear.h): activation quantization composed with scaled_mm.
// The quantized activations are taken from the context's workspace and given back once the GEMM is
// queued (stream order keeps them alive for it). Tested by tests/cpu/test_fp8_linear.cpp (against
// the two ops called by hand) and the layer tests.
#include "fp8kit/ops/linear.h"

#include "core/check.h"
#include "fp8kit/ops/gemm.h"
#include "fp8kit/ops/quant.h"

namespace fp8kit::ops {

Tensor fp8_linear(const ForwardContext& ctx, const Tensor& x, const Tensor& weight, const Tensor& weight_scale, const Fp8LinearOptions& o) {
  FP8KIT_CHECK_ARG(x.defined() && x.dim() >= 1, "fp8_linear: `x` must have at least one dimension, got {}",
                   x.description());
  const int64_t k = x.size(-1);
  Shape out_shape = x.shape();
  // The 2-D view of x (the spec's input.view(-1, K)); a non-viewable x is copied once.
  const Tensor x2d = (x.dim() == 2 ? x : (x.is_contiguous() ? x : x.contiguous()).view({-1, k}));
  Workspace::Scope scratch(ctx.workspace());
  const bool use_workspace = ctx.workspace().device() == x.device();
  QuantResult q;
  ScaledMmOptions mm;
  mm.bias = o.bias;
  mm.out_dtype = o.out_dtype;
  switch (o.activation) {
    case ActivationQuant::kDynamicPerToken:
    case ActivationQuant::kDynamicPerTensor:
    case ActivationQuant::kStatic: {
      ScaledFp8QuantOptions qo;
      if (use_workspace) qo.output = ctx.workspace().take(x2d.shape(), DType::kE4M3FN);
      if (o.activation == ActivationQuant::kStatic) {
        FP8KIT_CHECK_ARG(o.input_scale.defined(), "fp8_linear: static activations need `input_scale`");
        qo.scale = o.input_scale;
      }
      qo.use_per_token_if_dynamic = o.activation == ActivationQuant::kDynamicPerToken;
      qo.scale_ub = o.input_scale_ub;
      q = scaled_fp8_quant(ctx, x2d, qo);
      break;
    }
    case ActivationQuant::kGroup: {
      FP8KIT_CHECK_ARG(o.weight_block.has_value(), "fp8_linear: grouped activations need `weight_block`");
      PerTokenGroupQuantOptions go;
      go.group_size = o.weight_block->second;
      go.column_major_scales = true;  // the layout block GEMMs read
      if (use_workspace) go.output = ctx.workspace().take(x2d.shape(), DType::kE4M3FN);
      q = per_token_group_quant(ctx, x2d, go);
      mm.block = o.weight_block;
      break;
    }
  }
  const Tensor y = scaled_mm(ctx, q.q, weight, q.scale, weight_scale, mm);
  out_shape.back() = y.size(1);
  return x.dim() == 2 ? y : y.view(out_shape);
}

}  // namespace fp8kit::ops
