// Public entry points of the weight-side quantization ops (include/fp8kit/ops/quant.h):
// quantize_weight_*, dequantize_weight, per_tensor_dequantize, requantize_with_max_scale and
// normalize_e4m3fn_to_e4m3fnuz. Validate once, allocate, fill the quant_args.h struct, route.
// Tested by tests/cpu/test_quant_weight.cpp and test_quant_requant.cpp.
#include <algorithm>
#include <numeric>

#include "core/checked_math.h"
#include "fp8kit/ops/quant.h"
#include "ops/op_checks.h"
#include "ops/quant/quant_cuda.h"
#include "ops/quant/quant_ref.h"

namespace fp8kit::ops {

using namespace detail;

namespace {

QuantResult quantize_weight(const ForwardContext& ctx, std::string_view op, const Tensor& w, const WeightQuantOptions& options,
                            WeightQuantScheme scheme, int64_t block_n, int64_t block_k) {
  require_defined(op, w, "w");
  require_backend(op, w.device());
  require_dim(op, w, "w", 2);
  require_float_input(op, w, "w");
  require_quant_dtype(op, options.out_dtype, "out_dtype");
  const int64_t n = w.size(0), k = w.size(1);

  QuantResult result;
  result.q = Tensor::empty({n, k}, options.out_dtype, w.device());
  switch (scheme) {
    case WeightQuantScheme::kPerTensor:
      result.scale = Tensor::empty({}, DType::kF32, w.device());
      break;
    case WeightQuantScheme::kPerChannel:
      result.scale = Tensor::empty({n, 1}, DType::kF32, w.device());
      break;
    case WeightQuantScheme::kBlock:
      result.scale = Tensor::empty({ceil_div(n, block_n), ceil_div(k, block_k)}, DType::kF32, w.device());
      break;
  }

  WeightQuantArgs args;
  args.w = w.data_ptr();
  args.in_dtype = w.dtype();
  args.n = n;
  args.k = k;
  args.w_stride_n = w.stride(0);
  args.w_stride_k = w.stride(1);
  args.out = result.q.data_ptr();
  args.out_dtype = options.out_dtype;
  args.scale = static_cast<float*>(result.scale.data_ptr());
  args.scheme = scheme;
  // A block larger than the weight is legal (one partial block); clamped to the weight, it
  // quantizes the same and keeps every block product within the tensor's own size.
  args.block_n = std::min(block_n, std::max<int64_t>(n, 1));
  args.block_k = std::min(block_k, std::max<int64_t>(k, 1));
  args.fp8_max = fp8_quant_max(options.out_dtype);
  args.ue8m0_scales = options.ue8m0_scales;
  route(op, ctx, w.device(), args, quantize_weight_ref, quantize_weight_cuda);
  return result;
}

bool is_scale_dtype(DType d) { return d == DType::kF32 || d == DType::kF16 || d == DType::kBF16 || d == DType::kUE8M0; }

}  // namespace

QuantResult quantize_weight_per_tensor(const ForwardContext& ctx, const Tensor& w, const WeightQuantOptions& options) {
  return quantize_weight(ctx, "quantize_weight_per_tensor", w, options, WeightQuantScheme::kPerTensor, 1, 1);
}

QuantResult quantize_weight_per_channel(const ForwardContext& ctx, const Tensor& w, const WeightQuantOptions& options) {
  return quantize_weight(ctx, "quantize_weight_per_channel", w, options, WeightQuantScheme::kPerChannel, 1, 1);
}

QuantResult quantize_weight_block(const ForwardContext& ctx, const Tensor& w, int64_t block_n, int64_t block_k,
                                  const WeightQuantOptions& options) {
  FP8KIT_CHECK_ARG(block_n > 0 && block_k > 0,
                   "quantize_weight_block: `block_n` and `block_k` must be positive, got [{}, {}]", block_n, block_k);
  return quantize_weight(ctx, "quantize_weight_block", w, options, WeightQuantScheme::kBlock, block_n, block_k);
}

Tensor dequantize_weight(const ForwardContext& ctx, const Tensor& q, const Tensor& scale, DType out_dtype,
                         std::optional<std::pair<int64_t, int64_t>> block) {
  constexpr std::string_view kOp = "dequantize_weight";
  require_defined(kOp, q, "q");
  require_defined(kOp, scale, "scale");
  require_same_device(kOp, scale, "scale", q, "q");
  require_backend(kOp, q.device());
  require_dim(kOp, q, "q", 2);
  FP8KIT_CHECK_ARG(is_fp8(q.dtype()), "{}: `q` must be an FP8 tensor, got {}", kOp, q.description());
  FP8KIT_CHECK_ARG(is_scale_dtype(scale.dtype()), "{}: `scale` must be f32, f16, bf16 or ue8m0, got {}", kOp,
                   scale.description());
  FP8KIT_CHECK_ARG(out_dtype == DType::kF32 || out_dtype == DType::kF16 || out_dtype == DType::kBF16,
                   "{}: `out_dtype` must be f32, f16 or bf16, got {}", kOp, dtype_name(out_dtype));
  const int64_t n = q.size(0), k = q.size(1);

  DequantArgs args;
  args.scale = scale.data_ptr();
  args.scale_dtype = scale.dtype();
  const Shape& ss = scale.shape();
  if (scale.numel() == 1) {  // per tensor: one block covering everything
    args.block_n = std::max<int64_t>(n, 1);
    args.block_k = std::max<int64_t>(k, 1);
  } else if ((ss.size() == 1 && ss[0] == n) || (ss.size() == 2 && ss[0] == n && ss[1] == 1)) {  // per row
    args.block_n = 1;
    args.block_k = std::max<int64_t>(k, 1);
    args.scale_stride_n = scale.stride(0);
  } else {
    FP8KIT_CHECK_ARG(block.has_value(),
                     "{}: `scale` {} is neither per-tensor, per-row ([{}] or [{}, 1]) nor, without `block`, 2-D blocks",
                     kOp, scale.description(), n, n);
    const auto [bn, bk] = *block;
    FP8KIT_CHECK_ARG(bn > 0 && bk > 0, "{}: `block` must be positive, got [{}, {}]", kOp, bn, bk);
    const Shape expected{ceil_div(n, bn), ceil_div(k, bk)};
    FP8KIT_CHECK_ARG(ss == expected, "{}: `scale` {} does not match q {} with block [{}, {}]: expected shape {}", kOp,
                     scale.description(), q.description(), bn, bk, shape_to_string(expected));
    args.block_n = std::min(bn, std::max<int64_t>(n, 1));  // same blocks, see quantize_weight
    args.block_k = std::min(bk, std::max<int64_t>(k, 1));
    args.scale_stride_n = scale.stride(0);
    args.scale_stride_k = scale.stride(1);
  }

  Tensor out = Tensor::empty({n, k}, out_dtype, q.device());
  args.q = static_cast<const uint8_t*>(q.data_ptr());
  args.q_dtype = q.dtype();
  args.n = n;
  args.k = k;
  args.q_stride_n = q.stride(0);
  args.q_stride_k = q.stride(1);
  args.out = out.data_ptr();
  args.out_dtype = out_dtype;
  route(kOp, ctx, q.device(), args, dequantize_ref, dequantize_cuda);
  return out;
}

Tensor per_tensor_dequantize(const ForwardContext& ctx, const Tensor& q_in, const Tensor& scale) {
  constexpr std::string_view kOp = "per_tensor_dequantize";
  require_defined(kOp, q_in, "q");
  require_same_device(kOp, scale, "scale", q_in, "q");
  require_backend(kOp, q_in.device());
  FP8KIT_CHECK_ARG(is_fp8(q_in.dtype()), "{}: `q` must be an FP8 tensor, got {}", kOp, q_in.description());
  require_f32_scalar(kOp, scale, "scale");
  std::optional<int64_t> row_stride = detail::collapsed_row_stride(q_in);
  const Tensor q = row_stride ? q_in : contiguous_on(q_in, ctx.stream());
  const int64_t k = q.dim() == 0 ? 1 : q.size(-1);

  Tensor out = Tensor::empty(q.shape(), DType::kF16, q.device());
  // Every FP8 value is exact in f16, so the spec's f16(float(f16(q)) * s) is one rounding of
  // decode(q) * s: dequantize with one block covering the tensor.
  DequantArgs args;
  args.q = static_cast<const uint8_t*>(q.data_ptr());
  args.q_dtype = q.dtype();
  args.n = k == 0 ? 0 : q.numel() / k;
  args.k = k;
  args.q_stride_n = row_stride.value_or(k);
  args.q_stride_k = q.dim() == 0 ? 1 : q.stride(-1);
  args.scale = scale.data_ptr();
  args.scale_dtype = DType::kF32;
  args.block_n = std::max<int64_t>(args.n, 1);
  args.block_k = std::max<int64_t>(k, 1);
  args.out = out.data_ptr();
  args.out_dtype = DType::kF16;
  route(kOp, ctx, q.device(), args, dequantize_ref, dequantize_cuda);
  return out;
}

RequantizeResult requantize_with_max_scale(const ForwardContext& ctx, const Tensor& weight, const Tensor& weight_scale_in,
                                           const std::vector<int64_t>& logical_widths) {
  constexpr std::string_view kOp = "requantize_with_max_scale";
  require_defined(kOp, weight, "weight");
  require_defined(kOp, weight_scale_in, "weight_scale");
  require_same_device(kOp, weight_scale_in, "weight_scale", weight, "weight");
  require_backend(kOp, weight.device());
  require_dim(kOp, weight, "weight", 2);
  require_quant_dtype(kOp, weight.dtype(), "weight");
  require_dim(kOp, weight_scale_in, "weight_scale", 1);
  FP8KIT_CHECK_ARG(weight_scale_in.dtype() == DType::kF32, "{}: `weight_scale` must be f32, got {}", kOp,
                   weight_scale_in.description());
  const int64_t shards = weight_scale_in.size(0);
  FP8KIT_CHECK_ARG(shards >= 1, "{}: `weight_scale` is empty", kOp);
  FP8KIT_CHECK_ARG(int64_t(logical_widths.size()) == shards,
                   "{}: `logical_widths` has {} entries but `weight_scale` has {}", kOp, logical_widths.size(), shards);
  for (int64_t w : logical_widths) {
    FP8KIT_CHECK_ARG(w >= 0, "{}: `logical_widths` must be non-negative, got {}", kOp, w);
  }
  const int64_t total = std::accumulate(logical_widths.begin(), logical_widths.end(), int64_t(0));
  FP8KIT_CHECK_ARG(total == weight.size(0), "{}: `logical_widths` sum to {} but `weight` has {} rows", kOp, total,
                   weight.size(0));

  const Tensor weight_scale = contiguous_on(weight_scale_in, ctx.stream());
  RequantizeResult result{Tensor::empty({}, DType::kF32, weight.device()), weight};
  RequantizeArgs args;
  args.weight = static_cast<uint8_t*>(weight.data_ptr());
  args.weight_dtype = weight.dtype();
  args.n = weight.size(0);
  args.k = weight.size(1);
  args.w_stride_n = weight.stride(0);
  args.w_stride_k = weight.stride(1);
  args.weight_scale = static_cast<const float*>(weight_scale.data_ptr());
  args.logical_widths = logical_widths.data();
  args.num_shards = shards;
  args.max_scale = static_cast<float*>(result.max_scale.data_ptr());
  args.fp8_max = fp8_quant_max(weight.dtype());
  route(kOp, ctx, weight.device(), args, requantize_with_max_scale_ref, requantize_with_max_scale_cuda);
  return result;
}

FnuzResult normalize_e4m3fn_to_e4m3fnuz(const ForwardContext& ctx, const Tensor& weight_in, const Tensor& weight_scale_in,
                                        const Tensor& input_scale_in) {
  constexpr std::string_view kOp = "normalize_e4m3fn_to_e4m3fnuz";
  require_defined(kOp, weight_in, "weight");
  require_defined(kOp, weight_scale_in, "weight_scale");
  require_same_device(kOp, weight_scale_in, "weight_scale", weight_in, "weight");
  require_same_device(kOp, input_scale_in, "input_scale", weight_in, "weight");
  require_backend(kOp, weight_in.device());
  FP8KIT_CHECK_ARG(weight_in.dtype() == DType::kE4M3FN, "{}: `weight` must be e4m3fn, got {}", kOp,
                   weight_in.description());
  FP8KIT_CHECK_ARG(weight_scale_in.dtype() == DType::kF32, "{}: `weight_scale` must be f32, got {}", kOp,
                   weight_scale_in.description());
  FP8KIT_CHECK_ARG(!input_scale_in.defined() || input_scale_in.dtype() == DType::kF32,
                   "{}: `input_scale` must be f32, got {}", kOp, input_scale_in.description());

  const Tensor weight = contiguous_on(weight_in, ctx.stream());
  const Tensor weight_scale = contiguous_on(weight_scale_in, ctx.stream());
  const Tensor input_scale = input_scale_in.defined() ? contiguous_on(input_scale_in, ctx.stream()) : Tensor();
  FnuzResult result;
  result.weight = Tensor::empty(weight.shape(), DType::kE4M3FNUZ, weight.device());
  result.weight_scale = Tensor::empty(weight_scale.shape(), DType::kF32, weight.device());
  if (input_scale.defined()) result.input_scale = Tensor::empty(input_scale.shape(), DType::kF32, weight.device());

  FnuzNormalizeArgs args;
  args.weight = static_cast<const uint8_t*>(weight.data_ptr());
  args.out = static_cast<uint8_t*>(result.weight.data_ptr());
  args.numel = weight.numel();
  args.weight_scale = static_cast<const float*>(weight_scale.data_ptr());
  args.weight_scale_out = static_cast<float*>(result.weight_scale.data_ptr());
  args.weight_scale_numel = weight_scale.numel();
  if (input_scale.defined()) {
    args.input_scale = static_cast<const float*>(input_scale.data_ptr());
    args.input_scale_out = static_cast<float*>(result.input_scale.data_ptr());
    args.input_scale_numel = input_scale.numel();
  }
  route(kOp, ctx, weight.device(), args, normalize_e4m3fn_to_e4m3fnuz_ref, normalize_e4m3fn_to_e4m3fnuz_cuda);
  return result;
}

}  // namespace fp8kit::ops
