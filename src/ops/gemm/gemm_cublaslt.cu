// scaled_mm on cuBLASLt (CUDA 13): FP8 e4m3 x e4m3 with f32 accumulation (fast accumulation off),
// per-tensor scales, outer-vector scales (per-token x per-channel) or the 1x128 / 128x128 block
// modes, bias in the epilogue, bf16 / f16 / f32 out.
// Row-major y[M, N] = a[M, K] . b[N, K]^T is the column-major y^T[N, M] = b . a^T, i.e. cuBLASLt's
// "TN" FP8 layout with A := b (transposed, ld = ldb) and B := a (not transposed, ld = lda): so
// cuBLASLt's A scale is fp8kit's scale_b and its B scale is scale_a.
// Each thread keeps its own handle and a bounded cache of planned problems (the descriptors and
// the heuristic's algorithm); only the pointers are set per call. The workspace is the caller's
// (ScaledMmArgs::lt_workspace, from its context's Workspace).

#include <map>
#include <string>
#include <memory>
#include <tuple>

#include "fp8kit/error.h"
#include "core/cuda/cublaslt_api.h"
#include "core/cuda/cuda_check.h"
#include "fp8kit/tensor.h"
#include "ops/gemm/gemm_cublaslt.h"

namespace fp8kit::ops {
namespace {

// cuBLASLt, loaded on first use (core/cuda/cublaslt_api.h).
const cuda::CublasLtApi& lt() { return cuda::cublaslt(); }

// (No fmt here: nvcc compiles this file, and fmt's compile-time format checks do not build there.)
void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw Error(ErrorCode::kCuda, std::string("cuBLASLt ") + what + " failed: " + lt().cublasLtGetStatusName(status) +
                                      " (" + lt().cublasLtGetStatusString(status) + ")");
  }
}

cudaDataType_t cuda_type(DType d) {
  switch (d) {
    case DType::kBF16: return CUDA_R_16BF;
    case DType::kF16: return CUDA_R_16F;
    default: return CUDA_R_32F;
  }
}

cublasLtMatmulMatrixScale_t scale_mode(ScaleKind kind, bool is_weight) {
  switch (kind) {
    case ScaleKind::kTensor: return CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
    case ScaleKind::kRow: return CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    case ScaleKind::kBlock:
      return is_weight ? CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F : CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
  }
  return CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
}

// m, n, k, lda, ldb, ldc, scale kinds, out dtype, bias, fast_accum
using PlanKey = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, int, bool, bool>;

// The descriptors of one problem shape and the algorithm chosen for it.
struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool found = false;
  ~Plan() {
    if (op) lt().cublasLtMatmulDescDestroy(op);
    if (a) lt().cublasLtMatrixLayoutDestroy(a);
    if (b) lt().cublasLtMatrixLayoutDestroy(b);
    if (d) lt().cublasLtMatrixLayoutDestroy(d);
  }
};

struct Context {
  int device = -1;
  cublasLtHandle_t handle = nullptr;
  std::map<PlanKey, std::unique_ptr<Plan>> plans;
  // A runner's prefill chunks of every length would grow the cache without end: past this many
  // problems it starts over.
  static constexpr size_t kMaxPlans = 1024;

  explicit Context(int dev) : device(dev) { check(lt().cublasLtCreate(&handle), "create"); }
  ~Context() {
    plans.clear();
    if (handle) lt().cublasLtDestroy(handle);
  }
};

Context& context() {
  int device = 0;
  FP8KIT_CUDA_CHECK(cudaGetDevice(&device));
  thread_local std::map<int, std::unique_ptr<Context>> contexts;
  auto& slot = contexts[device];
  if (!slot) slot = std::make_unique<Context>(device);
  return *slot;
}

std::unique_ptr<Plan> make_plan(Context& ctx, const ScaledMmArgs& p) {
  auto plan = std::make_unique<Plan>();
  check(lt().cublasLtMatmulDescCreate(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul descriptor");
  const cublasOperation_t transa = CUBLAS_OP_T, transb = CUBLAS_OP_N;
  check(lt().cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof(transa)), "transa");
  check(lt().cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof(transb)), "transb");
  const int8_t fast_accum = p.fast_accum ? 1 : 0;  // 0: promote the FP8 accumulator, no precision loss
  check(lt().cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast_accum, sizeof(fast_accum)),
        "fast accumulation");
  const cublasLtMatmulMatrixScale_t mode_a = scale_mode(p.scale_b_kind, true),
                                    mode_b = scale_mode(p.scale_a_kind, false);
  check(lt().cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode_a, sizeof(mode_a)),
        "A scale mode");
  check(lt().cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode_b, sizeof(mode_b)),
        "B scale mode");
  // Pointers are per call, but the heuristic wants them set (non-null) to know scaling is on.
  const void* sa = p.scale_b;
  const void* sb = p.scale_a;
  check(lt().cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof(sa)),
        "A scale");
  check(lt().cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof(sb)),
        "B scale");
  if (p.bias != nullptr) {
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    const cudaDataType_t bias_type = cuda_type(p.out_dtype);
    check(lt().cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)),
          "epilogue");
    check(lt().cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                              sizeof(bias_type)),
          "bias type");
    check(lt().cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p.bias, sizeof(p.bias)),
          "bias");
  }
  // Column-major views: A = b as [K, N] (ld = ldb), B = a as [K, M] (ld = lda), D = y^T [N, M] (ld = ldc).
  check(lt().cublasLtMatrixLayoutCreate(&plan->a, CUDA_R_8F_E4M3, uint64_t(p.k), uint64_t(p.n), p.ldb), "A layout");
  check(lt().cublasLtMatrixLayoutCreate(&plan->b, CUDA_R_8F_E4M3, uint64_t(p.k), uint64_t(p.m), p.lda), "B layout");
  check(lt().cublasLtMatrixLayoutCreate(&plan->d, cuda_type(p.out_dtype), uint64_t(p.n), uint64_t(p.m), p.ldc),
        "D layout");

  cublasLtMatmulPreference_t pref = nullptr;
  check(lt().cublasLtMatmulPreferenceCreate(&pref), "preference");
  // The workspace the heuristic may plan for: with it, per-tensor and per-row problems of 16-128
  // rows got split-K algorithms slower than the ones it picks within 1 MiB (torch's default
  // cuBLASLt workspace), e.g. on the H200 8192 x 28672 at M = 64 77 us against 65, 4096 x 14336 at
  // M = 64 23 us against 20; block scales keep the whole buffer (4096 x 14336 at M = 32-128 ran
  // 1.6-1.7x slower within 1 MiB).
  const uint64_t workspace = uint64_t(scaled_mm_lt_workspace_bytes(p.scale_a_kind));
  check(lt().cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                  sizeof(workspace)),
        "workspace preference");
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status = lt().cublasLtMatmulAlgoGetHeuristic(ctx.handle, plan->op, plan->a, plan->b, plan->d,
                                                                    plan->d, pref, 1, &result, &found);
  lt().cublasLtMatmulPreferenceDestroy(pref);
  plan->found = status == CUBLAS_STATUS_SUCCESS && found > 0;
  if (plan->found) plan->algo = result.algo;
  return plan;
}

}  // namespace

bool scaled_mm_cublaslt(const ScaledMmArgs& p, cudaStream_t stream) {
  Context& ctx = context();
  const PlanKey key{p.m, p.n, p.k, p.lda, p.ldb, p.ldc, int(p.scale_a_kind), int(p.scale_b_kind), int(p.out_dtype),
                    p.bias != nullptr, p.fast_accum};
  if (p.lt_workspace == nullptr || p.lt_workspace_bytes < scaled_mm_lt_workspace_bytes(p.scale_a_kind)) {
    throw Error(ErrorCode::kInternal, "scaled_mm: cuBLASLt called without its workspace");
  }
  auto it = ctx.plans.find(key);
  if (it == ctx.plans.end()) {
    if (ctx.plans.size() >= Context::kMaxPlans) ctx.plans.clear();
    it = ctx.plans.emplace(key, make_plan(ctx, p)).first;
  }
  Plan& plan = *it->second;
  if (!plan.found) return false;
  const void* sa = p.scale_b;
  const void* sb = p.scale_a;
  check(lt().cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof(sa)), "A scale");
  check(lt().cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof(sb)), "B scale");
  if (p.bias != nullptr) {
    check(lt().cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p.bias, sizeof(p.bias)),
          "bias");
  }
  const float alpha = 1.0f, beta = 0.0f;
  check(lt().cublasLtMatmul(ctx.handle, plan.op, &alpha, p.b, plan.a, p.a, plan.b, &beta, p.out, plan.d, p.out, plan.d,
                       &plan.algo, p.lt_workspace, size_t(p.lt_workspace_bytes), stream),
        "matmul");
  return true;
}

}  // namespace fp8kit::ops
