// Argument checks shared by the op entry points (see op_checks.h).
#include "ops/op_checks.h"

namespace fp8kit::ops::detail {

void require_defined(std::string_view op, const Tensor& t, std::string_view name) {
  FP8KIT_CHECK_ARG(t.defined(), "{}: `{}` is an undefined tensor", op, name);
}

void require_backend(std::string_view op, Device device) {
#if !FP8KIT_WITH_CUDA
  FP8KIT_CHECK(!device.is_cuda(), ErrorCode::kUnsupported, "{}: fp8kit was built without CUDA", op);
#endif
}

void require_context(std::string_view op, const ForwardContext& ctx, Device device) {
  FP8KIT_CHECK_ARG(ctx.device() == device, "{}: the context is on {} but the inputs are on {}", op, ctx.device().str(),
                   device.str());
}

void require_same_device(std::string_view op, const Tensor& t, std::string_view name, const Tensor& ref,
                         std::string_view ref_name) {
  if (!t.defined()) return;
  FP8KIT_CHECK_ARG(t.device() == ref.device(), "{}: `{}` is on {} but `{}` is on {}", op, name, t.device().str(),
                   ref_name, ref.device().str());
}

void require_dim(std::string_view op, const Tensor& t, std::string_view name, int64_t dim) {
  FP8KIT_CHECK_ARG(t.dim() == dim, "{}: `{}` must be {}-D, got {}", op, name, dim, t.description());
}

void require_float_input(std::string_view op, const Tensor& t, std::string_view name) {
  const DType d = t.dtype();
  FP8KIT_CHECK_ARG(d == DType::kF32 || d == DType::kF16 || d == DType::kBF16,
                   "{}: `{}` must be f32, f16 or bf16, got {}", op, name, t.description());
}

void require_quant_dtype(std::string_view op, DType dtype, std::string_view name) {
  FP8KIT_CHECK_ARG(dtype == DType::kE4M3FN || dtype == DType::kE4M3FNUZ, "{}: `{}` must be e4m3fn or e4m3fnuz, got {}",
                   op, name, dtype_name(dtype));
}

void require_f32_scalar(std::string_view op, const Tensor& t, std::string_view name) {
  require_defined(op, t, name);
  FP8KIT_CHECK_ARG(t.dtype() == DType::kF32 && t.numel() == 1, "{}: `{}` must be a one-element f32 tensor, got {}", op,
                   name, t.description());
}

void require_output(std::string_view op, const Tensor& out, std::string_view name, DType dtype, const Shape& shape,
                    Device device) {
  require_defined(op, out, name);
  FP8KIT_CHECK_ARG(out.dtype() == dtype, "{}: `{}` must be {}, got {}", op, name, dtype_name(dtype), out.description());
  FP8KIT_CHECK_ARG(out.shape() == shape, "{}: `{}` must have shape {}, got {}", op, name, shape_to_string(shape),
                   out.description());
  FP8KIT_CHECK_ARG(out.is_contiguous(), "{}: `{}` must be contiguous", op, name);
  FP8KIT_CHECK_ARG(out.device() == device, "{}: `{}` is on {} but the input is on {}", op, name, out.device().str(),
                   device.str());
}

Tensor contiguous_on(const Tensor& t, Stream stream) {
  if (t.is_contiguous()) return t;
  Tensor copy = Tensor::empty(t.shape(), t.dtype(), t.device());
  copy.copy_(t, stream);
  return copy;
}

std::optional<int64_t> collapsed_row_stride(const Tensor& t) {
  int64_t row_stride = -1, expected = 0;
  for (int64_t d = t.dim() - 2; d >= 0; --d) {
    if (t.size(d) == 1) continue;
    if (row_stride < 0) {
      row_stride = t.stride(d);
    } else if (t.stride(d) != expected) {
      return std::nullopt;
    }
    expected = t.stride(d) * t.size(d);
  }
  return row_stride < 0 ? (t.dim() == 0 ? 1 : t.size(-1)) : row_stride;
}

}  // namespace fp8kit::ops::detail
