// Public entry of moe_sum (include/fp8kit/ops/moe_experts.h): validates once, picks the
// reduction rule from top_k, routes by device. Tested by tests/cpu/test_moe_sum.cpp.
#include "fp8kit/ops/moe_experts.h"
#include "ops/moe/moe_sum_cuda.h"
#include "ops/moe/moe_sum_ref.h"
#include "ops/op_checks.h"

namespace fp8kit::ops {

using namespace detail;

void moe_sum(const ForwardContext& ctx, const Tensor& input, Tensor& out) {
  constexpr std::string_view kOp = "moe_sum";
  require_defined(kOp, input, "input");
  require_defined(kOp, out, "out");
  require_same_device(kOp, out, "out", input, "input");
  require_backend(kOp, input.device());
  require_dim(kOp, input, "input", 3);
  require_float_input(kOp, input, "input");
  FP8KIT_CHECK_ARG(input.is_contiguous(), "{}: `input` must be contiguous, got strides {}", kOp,
                   shape_to_string(input.strides()));
  const int64_t m = input.size(0), top_k = input.size(1), d = input.size(2);
  require_output(kOp, out, "out", input.dtype(), {m, d}, input.device());
  MoeSumArgs args;
  args.m = m;
  args.top_k = top_k;
  args.d = d;
  args.input = input.data_ptr();
  args.out = out.data_ptr();
  args.dtype = input.dtype();
  args.accumulate_in_scalar = moe_sum_accumulates_in_scalar(top_k);
  if (m == 0 || d == 0) return;
  route(kOp, ctx, input.device(), args, moe_sum_ref, moe_sum_cuda);
}

}  // namespace fp8kit::ops
