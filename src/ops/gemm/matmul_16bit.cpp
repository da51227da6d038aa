// Public entry of matmul_16bit (include/fp8kit/ops/gemm.h): validates once, fills Matmul16Args,
// routes by device. Tested by tests/cpu/test_matmul16.cpp.
#include "fp8kit/ops/gemm.h"
#include "ops/gemm/gemm_cpu.h"  // CPU backend: matmul_16bit_cpu (reference or fast, by plan)
#include "ops/gemm/matmul_16bit_args.h"
#include "ops/op_checks.h"

namespace fp8kit::ops {

using namespace detail;

Tensor matmul_16bit(const ForwardContext& ctx, const Tensor& x, const Tensor& w, const Tensor& bias) {
  constexpr std::string_view kOp = "matmul_16bit";
  require_defined(kOp, x, "x");
  require_defined(kOp, w, "w");
  require_same_device(kOp, w, "w", x, "x");
  require_same_device(kOp, bias, "bias", x, "x");
  require_backend(kOp, x.device());
  require_dim(kOp, x, "x", 2);
  require_dim(kOp, w, "w", 2);
  require_float_input(kOp, x, "x");
  FP8KIT_CHECK_ARG(w.dtype() == x.dtype(), "{}: `w` must have x's dtype {}, got {}", kOp, dtype_name(x.dtype()),
                   w.description());
  const int64_t m = x.size(0), k = x.size(1), n = w.size(0);
  FP8KIT_CHECK_ARG(k >= 1 && (x.stride(1) == 1 || k == 1), "{}: `x` must be [M, K] with K >= 1 contiguous, got {}", kOp,
                   x.description());
  FP8KIT_CHECK_ARG(w.size(1) == k && (w.stride(1) == 1 || k == 1), "{}: `w` must be [N, {}] with K contiguous, got {}",
                   kOp, k, w.description());
  Matmul16Args args;
  args.m = m;
  args.n = n;
  args.k = k;
  args.dtype = x.dtype();
  args.x = x.data_ptr();
  args.ldx = m > 1 ? x.stride(0) : k;
  args.w = w.data_ptr();
  args.ldw = n > 1 ? w.stride(0) : k;
  if (bias.defined()) {
    FP8KIT_CHECK_ARG(bias.dim() == 1 && bias.size(0) == n && bias.dtype() == x.dtype() && bias.is_contiguous(),
                     "{}: `bias` must be a contiguous [N] = [{}] tensor of x's dtype {}, got {}", kOp, n,
                     dtype_name(x.dtype()), bias.description());
    args.bias = bias.data_ptr();
  }
  Tensor out = Tensor::empty({m, n}, x.dtype(), x.device());
  args.out = out.data_ptr();
  args.ldc = n;
  if (m == 0 || n == 0) return out;
  Workspace::Scope scratch(ctx.workspace());
  if (ctx.device().is_cuda()) {  // (a device mismatch is route's error)
    args.lt_workspace_bytes = kMatmul16LtWorkspaceBytes;
    args.lt_workspace = ctx.workspace().take({args.lt_workspace_bytes}, DType::kU8).data_ptr();
  }
  route(kOp, ctx, x.device(), args, matmul_16bit_cpu, matmul_16bit_cuda);
  return out;
}

}  // namespace fp8kit::ops
