// Public entry of scaled_mm (include/fp8kit/ops/gemm.h): validates once, works out the scaling
// from the scale shapes (or options.block), fills ScaledMmArgs and routes by device. Tested by
// tests/cpu/test_gemm.cpp (errors, layouts) and tests/gpu/test_gemm_cuda.cpp.
#include "fp8kit/ops/gemm.h"

#include "core/checked_math.h"
#include "ops/gemm/gemm_cpu.h"  // CPU backend: scaled_mm_cpu (fast or reference, by plan)
#include "ops/gemm/gemm_cuda.h"
#include "ops/gemm/gemm_ref.h"
#include "ops/op_checks.h"

namespace fp8kit::ops {

using namespace detail;

namespace {

constexpr std::string_view kOp = "scaled_mm";

// The [N, K] K-contiguous form of b: b itself, or the [K, N] column-major view transposed back.
Tensor weight_nk(const Tensor& b, int64_t k) {
  require_dim(kOp, b, "b", 2);
  if (b.size(1) == k && (b.stride(1) == 1 || k == 1)) return b;
  if (b.size(0) == k && (b.stride(0) == 1 || k == 1)) return b.t();
  fail(ErrorCode::kInvalidArgument,
       "{}: `b` must be [N, {}] with K contiguous, or its [{}, N] column-major view; got {} with strides {}", kOp, k, k,
       b.description(), shape_to_string(b.strides()));
}

void require_f32_scales(const Tensor& s, std::string_view name, const Tensor& a) {
  require_defined(kOp, s, name);
  require_same_device(kOp, s, name, a, "a");
  FP8KIT_CHECK_ARG(s.dtype() == DType::kF32, "{}: `{}` must be f32, got {}", kOp, name, s.description());
}

// Per-tensor or per-row scales: one element, or `rows` elements as [rows], [rows, 1] or [1, rows].
ScaleKind vector_scale_kind(const Tensor& s, std::string_view name, int64_t rows, std::string_view rows_name) {
  if (s.numel() == 1) return ScaleKind::kTensor;
  const bool shape_ok = (s.dim() == 1 && s.size(0) == rows) ||
                        (s.dim() == 2 && ((s.size(0) == rows && s.size(1) == 1) || (s.size(0) == 1 && s.size(1) == rows)));
  FP8KIT_CHECK_ARG(shape_ok && s.is_contiguous(),
                   "{}: `{}` must hold one scale or one per row of {} ({} = {}) contiguously, got {}", kOp, name,
                   rows_name, rows_name, rows, s.description());
  return ScaleKind::kRow;
}

}  // namespace

Tensor scaled_mm(const ForwardContext& ctx, const Tensor& a, const Tensor& b_in, const Tensor& scale_a, const Tensor& scale_b,
                 const ScaledMmOptions& options) {
  require_defined(kOp, a, "a");
  require_defined(kOp, b_in, "b");
  require_same_device(kOp, b_in, "b", a, "a");
  require_backend(kOp, a.device());
  require_dim(kOp, a, "a", 2);
  FP8KIT_CHECK_ARG(a.dtype() == DType::kE4M3FN && b_in.dtype() == DType::kE4M3FN,
                   "{}: `a` and `b` must be e4m3fn, got {} and {}", kOp, a.description(), b_in.description());
  const int64_t m = a.size(0), k = a.size(1);
  FP8KIT_CHECK_ARG(k >= 1, "{}: K must be at least 1, got {}", kOp, a.description());
  FP8KIT_CHECK_ARG(a.stride(1) == 1 || k == 1, "{}: `a` must be row-major (K contiguous), got strides {}", kOp,
                   shape_to_string(a.strides()));
  const Tensor b = weight_nk(b_in, k);
  const int64_t n = b.size(0);
  const DType out_dtype = options.out_dtype;
  FP8KIT_CHECK_ARG(out_dtype == DType::kBF16 || out_dtype == DType::kF16 || out_dtype == DType::kF32,
                   "{}: `out_dtype` must be bf16, f16 or f32, got {}", kOp, dtype_name(out_dtype));
  require_f32_scales(scale_a, "scale_a", a);
  require_f32_scales(scale_b, "scale_b", a);

  ScaledMmArgs args;
  args.m = m;
  args.n = n;
  args.k = k;
  args.a = static_cast<const uint8_t*>(a.data_ptr());
  args.lda = a.stride(0);
  args.b = static_cast<const uint8_t*>(b.data_ptr());
  args.ldb = b.stride(0);
  args.scale_a = static_cast<const float*>(scale_a.data_ptr());
  args.scale_b = static_cast<const float*>(scale_b.data_ptr());
  if (options.block) {
    const auto [bn, bk] = *options.block;
    FP8KIT_CHECK_ARG(bn > 0 && bk > 0, "{}: block sizes must be positive, got [{}, {}]", kOp, bn, bk);
    FP8KIT_CHECK_ARG(k % bk == 0, "{}: K = {} must be divisible by block_k = {} (activations are quantized in 1 x {} "
                     "groups)", kOp, k, bk, bk);
    FP8KIT_CHECK_ARG(scale_a.dim() == 2 && scale_a.size(0) == m && scale_a.size(1) == k / bk,
                     "{}: `scale_a` must be [M, K / block_k] = [{}, {}], got {}", kOp, m, k / bk, scale_a.description());
    FP8KIT_CHECK_ARG(scale_b.dim() == 2 && scale_b.size(0) == ceil_div(n, bn) && scale_b.size(1) == k / bk,
                     "{}: `scale_b` must be [ceil(N / block_n), K / block_k] = [{}, {}], got {}", kOp, ceil_div(n, bn),
                     k / bk, scale_b.description());
    args.scale_a_kind = args.scale_b_kind = ScaleKind::kBlock;
    args.sa_row_stride = scale_a.stride(0);
    args.sa_group_stride = scale_a.stride(1);
    args.sb_row_stride = scale_b.stride(0);
    args.sb_group_stride = scale_b.stride(1);
    args.block_n = bn;
    args.block_k = bk;
  } else {
    args.scale_a_kind = vector_scale_kind(scale_a, "scale_a", m, "a (M)");
    args.scale_b_kind = vector_scale_kind(scale_b, "scale_b", n, "b (N)");
  }
  if (options.bias.defined()) {
    require_same_device(kOp, options.bias, "bias", a, "a");
    FP8KIT_CHECK_ARG(options.bias.dim() == 1 && options.bias.size(0) == n && options.bias.dtype() == out_dtype &&
                         options.bias.is_contiguous(),
                     "{}: `bias` must be a contiguous [N] = [{}] tensor of the output dtype {}, got {}", kOp, n,
                     dtype_name(out_dtype), options.bias.description());
    args.bias = options.bias.data_ptr();
  }
  Tensor out = options.output;
  if (out.defined()) {
    require_output(kOp, out, "output", out_dtype, {m, n}, a.device());
  } else {
    out = Tensor::empty({m, n}, out_dtype, a.device());
  }
  args.out = out.data_ptr();
  args.ldc = n;
  args.out_dtype = out_dtype;
  args.fast_accum = options.fast_accum && !options.block;
  if (m == 0 || n == 0) return out;
  args.overrides = &ctx.overrides();
  Workspace::Scope scratch(ctx.workspace());
  if (ctx.device().is_cuda()) {  // (a device mismatch is route's error)
    args.lt_workspace_bytes = scaled_mm_lt_workspace_bytes(args.scale_a_kind);
    args.lt_workspace = ctx.workspace().take({args.lt_workspace_bytes}, DType::kU8).data_ptr();
  }
  route(kOp, ctx, a.device(), args, scaled_mm_cpu, scaled_mm_cuda);
  return out;
}

}  // namespace fp8kit::ops
