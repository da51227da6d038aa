// Public entry points of the activation quantization ops (include/fp8kit/ops/quant.h):
// scaled_fp8_quant and per_token_group_quant. Each validates its arguments once (spec 1.6 error
// texts verbatim), allocates the outputs, fills the args struct of quant_args.h and routes by
// device. Tested by tests/cpu/test_quant_scaled.cpp and test_quant_group.cpp.
#include "fp8kit/ops/quant.h"

#include <algorithm>
#include <cmath>

#include "ops/op_checks.h"
#include "ops/quant/quant_cpu.h"  // CPU backend: reference or AVX2 kernels, by plan
#include "ops/quant/quant_cuda.h"
#include "ops/quant/quant_ref.h"

namespace fp8kit::ops {

using namespace detail;

float fp8_quant_max(DType fp8_dtype) {
  switch (fp8_dtype) {
    case DType::kE4M3FN:
      return 448.0f;
    case DType::kE4M3FNUZ:
      return 224.0f;  // vLLM's quant_type_max (0x7E), not finfo's 240
    default:
      fail(ErrorCode::kInvalidArgument, "fp8_quant_max: expected e4m3fn or e4m3fnuz, got {}", dtype_name(fp8_dtype));
  }
}

float fp8_min_scaling_factor(DType fp8_dtype) { return 1.0f / (fp8_quant_max(fp8_dtype) * 512.0f); }

QuantResult scaled_fp8_quant(const ForwardContext& ctx, const Tensor& input, const ScaledFp8QuantOptions& options) {
  constexpr std::string_view kOp = "scaled_fp8_quant";
  require_defined(kOp, input, "input");
  require_same_device(kOp, options.scale, "scale", input, "input");
  require_same_device(kOp, options.scale_ub, "scale_ub", input, "input");
  require_same_device(kOp, options.output, "output", input, "input");
  require_backend(kOp, input.device());
  require_dim(kOp, input, "input", 2);
  require_float_input(kOp, input, "input");
  require_quant_dtype(kOp, options.out_dtype, "out_dtype");
  const int64_t m = input.size(0), k = input.size(1);
  FP8KIT_CHECK_ARG(input.stride(1) == 1 || k <= 1,
                   "{}: the last dimension of `input` must be contiguous, got strides {}", kOp,
                   shape_to_string(input.strides()));

  const bool is_static = options.scale.defined();
  const bool per_token = !is_static && options.use_per_token_if_dynamic;
  if (is_static) require_f32_scalar(kOp, options.scale, "scale");
  if (options.scale_ub.defined()) {
    // The reference ignores scale_ub outside per-token mode, a silent drop of the kind spec 2.9
    // H9 warns about; here it is an error.
    FP8KIT_CHECK_ARG(per_token, "{}: `scale_ub` only applies to dynamic per-token quantization", kOp);
    require_f32_scalar(kOp, options.scale_ub, "scale_ub");
  }
  int64_t out_rows = m;
  if (options.num_token_padding.has_value()) {
    FP8KIT_CHECK_ARG(!options.output.defined(), "padding not supported if output passed in");
    FP8KIT_CHECK_ARG(*options.num_token_padding >= 0, "{}: `num_token_padding` must be non-negative, got {}", kOp,
                     *options.num_token_padding);
    out_rows = std::max(m, *options.num_token_padding);
  }
  if (options.output.defined()) {
    require_output(kOp, options.output, "output", options.out_dtype, {m, k}, input.device());
  }

  QuantResult result;
  result.q =
      options.output.defined() ? options.output : Tensor::empty({out_rows, k}, options.out_dtype, input.device());
  Tensor scale_and_counter;  // dynamic per-tensor: the scale, then the CUDA kernels' grid counter
  if (is_static) {
    result.scale = options.scale;  // returned as given
  } else if (per_token) {
    result.scale = Tensor::empty(Shape{out_rows, 1}, DType::kF32, input.device());
  } else {
    scale_and_counter = Tensor::empty(Shape{2}, DType::kF32, input.device());
    result.scale = scale_and_counter.narrow(0, 0, 1);
  }

  ScaledFp8QuantArgs args;
  args.input = input.data_ptr();
  args.in_dtype = input.dtype();
  args.m = m;
  args.k = k;
  args.input_row_stride = input.stride(0);
  args.out = result.q.data_ptr();
  args.out_dtype = options.out_dtype;
  args.out_rows = out_rows;
  args.out_row_stride = k;
  args.scale = static_cast<float*>(result.scale.data_ptr());
  if (scale_and_counter.defined()) args.grid_counter = static_cast<uint32_t*>(scale_and_counter.data_ptr()) + 1;
  args.scale_ub = options.scale_ub.defined() ? static_cast<const float*>(options.scale_ub.data_ptr()) : nullptr;
  args.mode = is_static   ? ScaledQuantMode::kStatic
              : per_token ? ScaledQuantMode::kDynamicPerToken
                          : ScaledQuantMode::kDynamicPerTensor;
  args.fp8_max = fp8_quant_max(options.out_dtype);
  args.min_scaling_factor = fp8_min_scaling_factor(options.out_dtype);
  route(kOp, ctx, input.device(), args, scaled_fp8_quant_cpu, scaled_fp8_quant_cuda);
  return result;
}

QuantResult per_token_group_quant(const ForwardContext& ctx, const Tensor& x_in, const PerTokenGroupQuantOptions& options) {
  constexpr std::string_view kOp = "per_token_group_quant";
  require_defined(kOp, x_in, "x");
  require_same_device(kOp, options.output, "output", x_in, "x");
  require_backend(kOp, x_in.device());
  FP8KIT_CHECK_ARG(x_in.dim() >= 1, "{}: `x` must have at least one dimension, got {}", kOp, x_in.description());
  require_float_input(kOp, x_in, "x");
  require_quant_dtype(kOp, options.out_dtype, "out_dtype");
  const int64_t g = options.group_size;
  FP8KIT_CHECK_ARG(g > 0, "{}: `group_size` must be positive, got {}", kOp, g);
  const int64_t k = x_in.size(-1);
  FP8KIT_CHECK_ARG(k % g == 0, "the last dimension of `x` {} must be divisible by `group_size` {}", k, g);
  FP8KIT_CHECK_ARG(x_in.stride(-1) == 1 || k <= 1, "`x` groups must be contiguous");
  FP8KIT_CHECK_ARG(std::isfinite(options.eps) && options.eps > 0.0f, "{}: `eps` must be positive and finite, got {}",
                   kOp, options.eps);
  FP8KIT_CHECK_ARG(!options.column_major_scales || x_in.dim() == 2, "{}: column-major scales need a 2-D `x`, got {}",
                   kOp, x_in.description());
  FP8KIT_CHECK_ARG(!options.tma_aligned_scales || options.column_major_scales,
                   "{}: `tma_aligned_scales` needs `column_major_scales`", kOp);
  if (options.output.defined()) {
    require_output(kOp, options.output, "output", options.out_dtype, x_in.shape(), x_in.device());
  }

  // Leading dimensions that do not collapse into rows with one stride are copied once.
  std::optional<int64_t> row_stride = collapsed_row_stride(x_in);
  const Tensor x = row_stride ? x_in : contiguous_on(x_in, ctx.stream());
  if (!row_stride) row_stride = k;
  const int64_t rows = shape_numel(Shape(x.shape().begin(), x.shape().end() - 1));
  const int64_t groups = k / g;

  QuantResult result;
  result.q = options.output.defined() ? options.output : Tensor::empty(x.shape(), options.out_dtype, x.device());
  // Column-major: stored [K/g, M_pad] and viewed as [M, K/g] with strides (1, M_pad), the layout
  // block GEMMs read; M_pad = M, or M rounded up to 4 floats so that every column starts 16-byte
  // aligned for a TMA load (DeepGEMM's get_col_major_tma_aligned_tensor).
  const int64_t m_pad = options.tma_aligned_scales ? (rows + 3) / 4 * 4 : rows;
  if (options.column_major_scales) {
    result.scale = Tensor::empty({groups, m_pad}, DType::kF32, x.device()).narrow(1, 0, rows).t();
  } else {
    Shape scale_shape = x.shape();
    scale_shape.back() = groups;
    result.scale = Tensor::empty(scale_shape, DType::kF32, x.device());
  }

  PerTokenGroupQuantArgs args;
  args.input = x.data_ptr();
  args.in_dtype = x.dtype();
  args.rows = rows;
  args.k = k;
  args.input_row_stride = *row_stride;
  args.out = result.q.data_ptr();
  args.out_dtype = options.out_dtype;
  args.out_row_stride = k;
  args.scale = static_cast<float*>(result.scale.data_ptr());
  args.scale_row_stride = options.column_major_scales ? 1 : groups;
  args.scale_group_stride = options.column_major_scales ? m_pad : 1;
  args.group_size = g;
  args.eps = options.eps;
  args.fp8_max = fp8_quant_max(options.out_dtype);
  args.use_ue8m0 = options.use_ue8m0;
  route(kOp, ctx, x.device(), args, per_token_group_quant_cpu, per_token_group_quant_cuda);
  return result;
}

}  // namespace fp8kit::ops
