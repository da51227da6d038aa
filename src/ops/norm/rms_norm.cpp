// Public entry of rms_norm / fused_add_rms_norm (include/fp8kit/ops/norm.h): validates once,
// fills RmsNormArgs and routes by device (CPU: rms_norm_cpu.h; CUDA: rms_norm_cuda.h). Tested by
// tests/cpu/test_rms_norm.cpp and tests/gpu/test_norm_rope_cuda.cpp.
#include <cmath>
#include <optional>

#include "fp8kit/ops/norm.h"
#include "ops/context_checks.h"
#include "ops/norm/rms_norm_cpu.h"
#include "ops/norm/rms_norm_cuda.h"
#include "ops/op_checks.h"

namespace fp8kit::ops {

using namespace detail;

namespace {

// The checks both norms share.
void check_common(std::string_view op, const ForwardContext& ctx, const Tensor& x, const Tensor& weight, float eps) {
  require_defined(op, x, "x");
  require_defined(op, weight, "weight");
  require_context_device(op, ctx, x, "x");
  require_context_device(op, ctx, weight, "weight");
  FP8KIT_CHECK_ARG(x.dim() >= 1, "{}: `x` must have at least one dimension, got {}", op, x.description());
  require_float_input(op, x, "x");
  const int64_t hidden = x.size(-1);
  FP8KIT_CHECK_ARG(
      weight.dtype() == x.dtype() && weight.dim() == 1 && weight.size(0) == hidden && weight.is_contiguous(),
      "{}: `weight` must be a contiguous [{}] tensor of x's dtype {}, got {}", op, hidden, dtype_name(x.dtype()),
      weight.description());
  FP8KIT_CHECK_ARG(std::isfinite(eps) && eps >= 0.0f, "{}: `eps` must be finite and non-negative, got {}", op, eps);
}

// The row stride of x when its last dimension is contiguous and its rows are evenly strided.
std::optional<int64_t> row_stride_of(const Tensor& x) {
  if (x.stride(-1) != 1 && x.size(-1) > 1) return std::nullopt;
  return collapsed_row_stride(x);
}

RmsNormArgs make_args(const Tensor& x, int64_t x_row_stride, const Tensor& weight, float eps) {
  RmsNormArgs a;
  a.hidden = x.size(-1);
  a.rows = a.hidden == 0 ? 0 : x.numel() / a.hidden;
  a.x = x.data_ptr();
  a.x_row_stride = x_row_stride;
  a.weight = weight.data_ptr();
  a.dtype = x.dtype();
  a.eps = eps;
  return a;
}

}  // namespace

Tensor rms_norm(const ForwardContext& ctx, const Tensor& x_in, const Tensor& weight, float eps, Tensor out) {
  constexpr std::string_view kOp = "rms_norm";
  check_common(kOp, ctx, x_in, weight, eps);
  require_context_device(kOp, ctx, out, "out");
  if (out.defined()) require_output(kOp, out, "out", x_in.dtype(), x_in.shape(), x_in.device());
  require_backend(kOp, ctx.device());
  // Rows that are not evenly strided with a contiguous last dimension are copied once.
  std::optional<int64_t> row_stride = row_stride_of(x_in);
  const Tensor x = row_stride ? x_in : contiguous_on(x_in, ctx.stream());
  if (!row_stride) row_stride = x.size(-1);
  if (!out.defined()) out = Tensor::empty(x.shape(), x.dtype(), x.device());
  RmsNormArgs args = make_args(x, *row_stride, weight, eps);
  args.out = out.data_ptr();
  args.out_row_stride = args.hidden;
  args.num_parts = work_parts(ctx);
  route(kOp, ctx, ctx.device(), args, rms_norm_cpu, rms_norm_cuda);
  return out;
}

void fused_add_rms_norm(const ForwardContext& ctx, const Tensor& x, const Tensor& residual, const Tensor& weight,
                        float eps) {
  constexpr std::string_view kOp = "fused_add_rms_norm";
  check_common(kOp, ctx, x, weight, eps);
  const std::optional<int64_t> row_stride = row_stride_of(x);
  FP8KIT_CHECK_ARG(row_stride.has_value(),
                   "{}: `x` is written in place and needs a contiguous last dimension and evenly strided rows, got "
                   "strides {}",
                   kOp, shape_to_string(x.strides()));
  require_defined(kOp, residual, "residual");
  require_context_device(kOp, ctx, residual, "residual");
  FP8KIT_CHECK_ARG(residual.dtype() == x.dtype() && residual.shape() == x.shape(),
                   "{}: `residual` must have the dtype and shape of `x` ({}), got {}", kOp, x.description(),
                   residual.description());
  FP8KIT_CHECK_ARG(residual.is_contiguous(), "{}: `residual` must be contiguous", kOp);
  require_backend(kOp, ctx.device());
  RmsNormArgs args = make_args(x, *row_stride, weight, eps);
  args.residual = residual.data_ptr();
  args.out = x.data_ptr();
  args.out_row_stride = *row_stride;
  args.num_parts = work_parts(ctx);
  route(kOp, ctx, ctx.device(), args, rms_norm_cpu, rms_norm_cuda);
}

}  // namespace fp8kit::ops
