// Public entry of silu_and_mul / gelu_and_mul (include/fp8kit/ops/moe_experts.h): validates once,
// fills ActAndMulArgs, routes by device. Tested by tests/cpu/test_moe_activation.cpp.
#include "fp8kit/ops/moe_experts.h"
#include "ops/activation/activation_cpu.h"  // CPU backend: reference or AVX2 silu, by plan
#include "ops/activation/activation_cuda.h"
#include "ops/activation/activation_ref.h"
#include "ops/op_checks.h"

namespace fp8kit::ops {

using namespace detail;

namespace {

Tensor act_and_mul(const ForwardContext& ctx, std::string_view op, GatedActivation activation, const Tensor& x_in,
                   Tensor out) {
  require_defined(op, x_in, "x");
  require_backend(op, x_in.device());
  require_float_input(op, x_in, "x");
  FP8KIT_CHECK_ARG(x_in.dim() >= 1 && x_in.size(-1) % 2 == 0, "{}: the last dimension of `x` must be even ([..., 2d]), got {}",
                   op, x_in.description());
  const int64_t d = x_in.size(-1) / 2;
  Shape out_shape = x_in.shape();
  out_shape.back() = d;
  // Rows must be evenly strided with the last dimension contiguous; anything else is copied once.
  Tensor x = x_in;
  std::optional<int64_t> ldx = collapsed_row_stride(x);
  if (!ldx || (x.stride(-1) != 1 && x.size(-1) > 1)) {
    x = contiguous_on(x_in, ctx.stream());
    ldx = x.size(-1);
  }
  if (out.defined()) {
    require_output(op, out, "out", x.dtype(), out_shape, x.device());
  } else {
    out = Tensor::empty(out_shape, x.dtype(), x.device());
  }
  ActAndMulArgs args;
  args.rows = d == 0 ? 0 : x.numel() / (2 * d);
  args.d = d;
  args.x = x.data_ptr();
  args.ldx = *ldx;
  args.out = out.data_ptr();
  args.ldo = d;
  args.dtype = x.dtype();
  args.activation = activation;
  if (args.rows == 0 || d == 0) return out;
  route(op, ctx, x.device(), args, act_and_mul_cpu, act_and_mul_cuda);
  return out;
}

}  // namespace

Tensor silu_and_mul(const ForwardContext& ctx, const Tensor& x, Tensor out) {
  return act_and_mul(ctx, "silu_and_mul", GatedActivation::kSilu, x, std::move(out));
}

Tensor gelu_and_mul(const ForwardContext& ctx, const Tensor& x, Tensor out) {
  return act_and_mul(ctx, "gelu_and_mul", GatedActivation::kGelu, x, std::move(out));
}

}  // namespace fp8kit::ops
