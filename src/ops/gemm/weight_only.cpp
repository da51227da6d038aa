// Public entry of weight_only_mm (include/fp8kit/ops/gemm.h): validates once, fills
// WeightOnlyMmArgs, routes by device. Tested by tests/cpu/test_weight_only.cpp and
// tests/gpu/test_weight_only_cuda.cpp.
#include <string_view>

#include "core/checked_math.h"
#include "fp8kit/ops/gemm.h"
#include "ops/gemm/gemm_cpu.h"  // CPU backend: weight_only_mm_cpu (fast or reference, by plan)
#include "ops/gemm/weight_only_cuda.h"
#include "ops/gemm/weight_only_ref.h"
#include "ops/op_checks.h"

namespace fp8kit::ops {

using namespace detail;

Tensor weight_only_mm(const ForwardContext& ctx, const Tensor& x, const Tensor& w_in, const Tensor& w_scale, const WeightOnlyMmOptions& options) {
  constexpr std::string_view kOp = "weight_only_mm";
  require_defined(kOp, x, "x");
  require_defined(kOp, w_in, "w");
  require_defined(kOp, w_scale, "w_scale");
  require_same_device(kOp, w_in, "w", x, "x");
  require_same_device(kOp, w_scale, "w_scale", x, "x");
  require_backend(kOp, x.device());
  require_dim(kOp, x, "x", 2);
  require_dim(kOp, w_in, "w", 2);
  FP8KIT_CHECK_ARG(x.dtype() == DType::kBF16 || x.dtype() == DType::kF16, "{}: `x` must be bf16 or f16, got {}", kOp,
                   x.description());
  FP8KIT_CHECK_ARG(w_in.dtype() == DType::kE4M3FN, "{}: `w` must be e4m3fn, got {}", kOp, w_in.description());
  FP8KIT_CHECK_ARG(w_scale.dtype() == DType::kF32, "{}: `w_scale` must be f32, got {}", kOp, w_scale.description());
  const int64_t m = x.size(0), k = x.size(1);
  FP8KIT_CHECK_ARG(k >= 1 && (x.stride(1) == 1 || k == 1), "{}: `x` must be [M, K] with K >= 1 contiguous, got {}", kOp,
                   x.description());
  Tensor w = w_in;
  if (!(w.size(1) == k && (w.stride(1) == 1 || k == 1))) {
    FP8KIT_CHECK_ARG(w.size(0) == k && (w.stride(0) == 1 || k == 1),
                     "{}: `w` must be [N, {}] with K contiguous, or its [{}, N] column-major view; got {}", kOp, k, k,
                     w_in.description());
    w = w.t();
  }
  const int64_t n = w.size(0);

  WeightOnlyMmArgs args;
  args.m = m;
  args.n = n;
  args.k = k;
  args.x = x.data_ptr();
  args.ldx = x.stride(0);
  args.act_dtype = x.dtype();
  args.w = static_cast<const uint8_t*>(w.data_ptr());
  args.ldw = w.stride(0);
  args.scale = static_cast<const float*>(w_scale.data_ptr());
  if (options.block) {
    const auto [bn, bk] = *options.block;
    FP8KIT_CHECK_ARG(bn > 0 && bk > 0, "{}: block sizes must be positive, got [{}, {}]", kOp, bn, bk);
    FP8KIT_CHECK_ARG(w_scale.dim() == 2 && w_scale.size(0) == ceil_div(n, bn) && w_scale.size(1) == ceil_div(k, bk),
                     "{}: `w_scale` must be [ceil(N / block_n), ceil(K / block_k)] = [{}, {}], got {}", kOp,
                     ceil_div(n, bn), ceil_div(k, bk), w_scale.description());
    args.scale_kind = ScaleKind::kBlock;
    args.s_row_stride = w_scale.stride(0);
    args.s_col_stride = w_scale.stride(1);
    args.block_n = bn;
    args.block_k = bk;
  } else if (w_scale.numel() == 1) {
    args.scale_kind = ScaleKind::kTensor;
  } else {
    FP8KIT_CHECK_ARG(w_scale.numel() == n && w_scale.is_contiguous() && (w_scale.dim() == 1 || w_scale.size(-1) == 1),
                     "{}: `w_scale` must hold one scale, one per output channel ([N] or [N, 1], N = {}), or block "
                     "scales with options.block; got {}",
                     kOp, n, w_scale.description());
    args.scale_kind = ScaleKind::kRow;
  }
  if (options.bias.defined()) {
    require_same_device(kOp, options.bias, "bias", x, "x");
    FP8KIT_CHECK_ARG(options.bias.dim() == 1 && options.bias.size(0) == n && options.bias.dtype() == x.dtype() &&
                         options.bias.is_contiguous(),
                     "{}: `bias` must be a contiguous [N] = [{}] tensor of x's dtype {}, got {}", kOp, n,
                     dtype_name(x.dtype()), options.bias.description());
    args.bias = options.bias.data_ptr();
  }
  Tensor out = options.output;
  if (out.defined()) {
    require_output(kOp, out, "output", x.dtype(), {m, n}, x.device());
  } else {
    out = Tensor::empty({m, n}, x.dtype(), x.device());
  }
  args.out = out.data_ptr();
  args.ldc = n;
  if (m == 0 || n == 0) return out;
  args.overrides = &ctx.overrides();
  route(kOp, ctx, x.device(), args, weight_only_mm_cpu, weight_only_mm_cuda);
  return out;
}

}  // namespace fp8kit::ops
