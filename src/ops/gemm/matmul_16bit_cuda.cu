// matmul_16bit on CUDA: cuBLASLt (bf16 / f16 operands, f32 compute and accumulation, bias in the
// epilogue) when the operands are 16-byte aligned, else a tiled CUDA-core kernel with f32
// accumulation and the reference's single rounding of (sum + bias). Reference:
// matmul_16bit_ref.cpp (double accumulation); the kernels agree with it within f32 accumulation
// error. Floor: 2*M*N*K FLOPs over the 16-bit tensor-core peak, or the weight bytes over HBM
// bandwidth at small M.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "core/cuda/cublaslt_api.h"
#include "core/cuda/cuda_check.h"
#include "fp8kit/error.h"
#include "fp8kit/half.h"
#include "fp8kit/tensor.h"
#include "ops/gemm/matmul_16bit_args.h"

namespace fp8kit::ops {
namespace {

// cuBLASLt, loaded on first use (core/cuda/cublaslt_api.h).
const cuda::CublasLtApi& lt() { return cuda::cublaslt(); }

// ---- generic kernel ----

constexpr int kTile = 16, kDepth = 32;

__device__ __forceinline__ float load_elem(const void* p, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::kBF16: return bf16_to_float(static_cast<const BFloat16*>(p)[i]);
    case DType::kF16: return f16_to_float(static_cast<const Float16*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

__global__ void matmul_16bit_kernel(const Matmul16Args args) {
  __shared__ float x_tile[kTile][kDepth + 1], w_tile[kTile][kDepth + 1];
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * kTile + tx;
  const int64_t i = int64_t(blockIdx.y) * kTile + ty, j = int64_t(blockIdx.x) * kTile + tx;
  float acc = 0.0f;
  for (int64_t k0 = 0; k0 < args.k; k0 += kDepth) {
    __syncthreads();
    for (int e = tid; e < kTile * kDepth; e += kTile * kTile) {
      const int r = e / kDepth, c = e % kDepth;
      const int64_t kk = k0 + c, xi = int64_t(blockIdx.y) * kTile + r, wj = int64_t(blockIdx.x) * kTile + r;
      x_tile[r][c] = (xi < args.m && kk < args.k) ? load_elem(args.x, args.dtype, xi * args.ldx + kk) : 0.0f;
      w_tile[r][c] = (wj < args.n && kk < args.k) ? load_elem(args.w, args.dtype, wj * args.ldw + kk) : 0.0f;
    }
    __syncthreads();
    for (int c = 0; c < kDepth && k0 + c < args.k; ++c) acc = __fmaf_rn(x_tile[ty][c], w_tile[tx][c], acc);
  }
  if (i >= args.m || j >= args.n) return;
  const float y = args.bias != nullptr ? __fadd_rn(acc, load_elem(args.bias, args.dtype, j)) : acc;
  const int64_t o = i * args.ldc + j;
  switch (args.dtype) {
    case DType::kBF16: static_cast<BFloat16*>(args.out)[o] = float_to_bf16(y); break;
    case DType::kF16: static_cast<Float16*>(args.out)[o] = float_to_f16(y); break;
    default: static_cast<float*>(args.out)[o] = y; break;
  }
}

void launch_generic(const Matmul16Args& args, cudaStream_t s) {
  const dim3 block(kTile, kTile);
  const dim3 grid(unsigned((args.n + kTile - 1) / kTile), unsigned((args.m + kTile - 1) / kTile));
  matmul_16bit_kernel<<<grid, block, 0, s>>>(args);
  FP8KIT_CHECK_LAUNCH(s, "matmul_16bit_kernel");
}

// ---- cuBLASLt ----

// (No fmt here: nvcc compiles this file.)
void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw Error(ErrorCode::kCuda, std::string("cuBLASLt ") + what + " failed: " + lt().cublasLtGetStatusName(status));
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// cuBLASLt's 16-bit kernels want 16-byte aligned pointers and leading dimensions.
bool cublaslt_eligible(const Matmul16Args& a) {
  if (a.dtype != DType::kBF16 && a.dtype != DType::kF16) return false;
  const bool lds = a.ldx % 8 == 0 && a.ldw % 8 == 0 && a.ldc % 8 == 0 && a.k % 8 == 0;
  return lds && aligned16(a.x) && aligned16(a.w) && aligned16(a.out) && (a.bias == nullptr || aligned16(a.bias));
}

using PlanKey = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, bool>;

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
  cublasLtHandle_t handle = nullptr;
  std::map<PlanKey, std::unique_ptr<Plan>> plans;
  static constexpr size_t kMaxPlans = 1024;  // then the cache starts over (prefill chunks of every length)

  Context() { check(lt().cublasLtCreate(&handle), "create"); }
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
  if (!slot) slot = std::make_unique<Context>();
  return *slot;
}

// Row-major y[M, N] = x[M, K] . w[N, K]^T is the column-major y^T[N, M] = w^T' . x^T': cuBLASLt's
// A is w ([K, N] column-major, transposed), its B is x ([K, M] column-major).
std::unique_ptr<Plan> make_plan(Context& ctx, const Matmul16Args& p) {
  auto plan = std::make_unique<Plan>();
  const cudaDataType_t type = p.dtype == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F;
  check(lt().cublasLtMatmulDescCreate(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul descriptor");
  const cublasOperation_t transa = CUBLAS_OP_T, transb = CUBLAS_OP_N;
  check(lt().cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof(transa)), "transa");
  check(lt().cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof(transb)), "transb");
  if (p.bias != nullptr) {
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    check(lt().cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)),
          "epilogue");
    check(lt().cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &type, sizeof(type)),
          "bias type");
    check(lt().cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p.bias, sizeof(p.bias)),
          "bias");
  }
  check(lt().cublasLtMatrixLayoutCreate(&plan->a, type, uint64_t(p.k), uint64_t(p.n), p.ldw), "A layout");
  check(lt().cublasLtMatrixLayoutCreate(&plan->b, type, uint64_t(p.k), uint64_t(p.m), p.ldx), "B layout");
  check(lt().cublasLtMatrixLayoutCreate(&plan->d, type, uint64_t(p.n), uint64_t(p.m), p.ldc), "D layout");
  cublasLtMatmulPreference_t pref = nullptr;
  check(lt().cublasLtMatmulPreferenceCreate(&pref), "preference");
  const uint64_t workspace = uint64_t(kMatmul16LtWorkspaceBytes);
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

// Returns false when cuBLASLt has no algorithm for the problem.
bool run_cublaslt(const Matmul16Args& p, cudaStream_t stream) {
  Context& ctx = context();
  const PlanKey key{p.m, p.n, p.k, p.ldx, p.ldw, p.ldc, int(p.dtype), p.bias != nullptr};
  if (p.lt_workspace == nullptr || p.lt_workspace_bytes < kMatmul16LtWorkspaceBytes) {
    throw Error(ErrorCode::kInternal, "matmul_16bit: cuBLASLt called without its workspace");
  }
  auto it = ctx.plans.find(key);
  if (it == ctx.plans.end()) {
    if (ctx.plans.size() >= Context::kMaxPlans) ctx.plans.clear();
    it = ctx.plans.emplace(key, make_plan(ctx, p)).first;
  }
  Plan& plan = *it->second;
  if (!plan.found) return false;
  if (p.bias != nullptr) {
    check(lt().cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p.bias, sizeof(p.bias)),
          "bias");
  }
  const float alpha = 1.0f, beta = 0.0f;
  check(lt().cublasLtMatmul(ctx.handle, plan.op, &alpha, p.w, plan.a, p.x, plan.b, &beta, p.out, plan.d, p.out, plan.d,
                       &plan.algo, p.lt_workspace, size_t(p.lt_workspace_bytes), stream),
        "matmul");
  return true;
}

}  // namespace

void matmul_16bit_cuda(const Matmul16Args& args, Stream stream) {
  const cudaStream_t s = static_cast<cudaStream_t>(stream.handle);
  if (cublaslt_eligible(args) && run_cublaslt(args, s)) return;
  launch_generic(args, s);
}

}  // namespace fp8kit::ops
