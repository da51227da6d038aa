// weight_only_mm on CUDA cores: 16 x 16 outputs per block, weights dequantized into shared memory
// with the reference's rounding (decode * scale in float), float accumulation, the reference's
// epilogue. Runs on every architecture (sm_80 has no FP8 tensor cores). Correct for any shape;
// the tensor-core kernels take what they serve: M > 32 the tiled kernel of weight_only_tiled.cu,
// 2 <= M <= 32 the weight-streaming one of weight_only_mma.cu, M = 1 the CUDA-core decode kernel
// of weight_only_decode.cu. FP8KIT_WEIGHT_ONLY_GEMM=cuda_core keeps the CUDA-core kernels, =tiled
// takes the tiled kernel at every M (tests, benchmarks).

#include "core/cuda/cuda_check.h"
#include "fp8kit/fp8.h"
#include "fp8kit/half.h"
#include "ops/gemm/gemm_config.h"
#include "ops/gemm/weight_only_cuda.h"
#include "ops/gemm/weight_only_decode.h"
#include "ops/gemm/weight_only_mma.h"

namespace fp8kit::ops {
namespace {

constexpr int kTile = 16, kDepth = 32;

__device__ __forceinline__ float load16(const void* p, DType dtype, int64_t i) {
  return dtype == DType::kBF16 ? bf16_to_float(static_cast<const BFloat16*>(p)[i])
                               : f16_to_float(static_cast<const Float16*>(p)[i]);
}

__device__ __forceinline__ float weight_scale(const WeightOnlyMmArgs& a, int64_t row, int64_t col) {
  switch (a.scale_kind) {
    case ScaleKind::kTensor: return a.scale[0];
    case ScaleKind::kRow: return a.scale[row];
    default: return a.scale[(row / a.block_n) * a.s_row_stride + (col / a.block_k) * a.s_col_stride];
  }
}

__global__ void weight_only_kernel(const WeightOnlyMmArgs args) {
  __shared__ float table[256];
  __shared__ float x_tile[kTile][kDepth + 1], w_tile[kTile][kDepth + 1];
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * kTile + tx;
  table[tid] = e4m3fn_bits_to_float(uint8_t(tid));
  const int64_t i = int64_t(blockIdx.y) * kTile + ty, j = int64_t(blockIdx.x) * kTile + tx;
  float acc = 0.0f;
  for (int64_t k0 = 0; k0 < args.k; k0 += kDepth) {
    __syncthreads();
    for (int e = tid; e < kTile * kDepth; e += kTile * kTile) {
      const int r = e / kDepth, c = e % kDepth;
      const int64_t kk = k0 + c, xi = int64_t(blockIdx.y) * kTile + r, wj = int64_t(blockIdx.x) * kTile + r;
      x_tile[r][c] = (xi < args.m && kk < args.k) ? load16(args.x, args.act_dtype, xi * args.ldx + kk) : 0.0f;
      w_tile[r][c] = (wj < args.n && kk < args.k)
                         ? __fmul_rn(table[args.w[wj * args.ldw + kk]], weight_scale(args, wj, kk))
                         : 0.0f;
    }
    __syncthreads();
    for (int c = 0; c < kDepth && k0 + c < args.k; ++c) acc = __fmaf_rn(x_tile[ty][c], w_tile[tx][c], acc);
  }
  if (i >= args.m || j >= args.n) return;
  const float y = args.bias != nullptr ? __fadd_rn(acc, load16(args.bias, args.act_dtype, j)) : acc;
  if (args.act_dtype == DType::kBF16) {
    static_cast<BFloat16*>(args.out)[i * args.ldc + j] = float_to_bf16(y);
  } else {
    static_cast<Float16*>(args.out)[i * args.ldc + j] = float_to_f16(y);
  }
}

}  // namespace

void weight_only_mm_cuda(const WeightOnlyMmArgs& args, Stream stream) {
  const cudaStream_t s = static_cast<cudaStream_t>(stream.handle);
  int device = 0;
  FP8KIT_CUDA_CHECK(cudaGetDevice(&device));
  WeightOnlyDesc desc;
  desc.m = args.m;
  desc.tiled_serves = weight_only_tiled_serves(args, device);
  desc.mma_serves = weight_only_mma_serves(args, device);
  desc.decode_serves = weight_only_decode_serves(args);
  static const Overrides kDefaults;
  switch (plan_weight_only_mm(desc, args.overrides != nullptr ? *args.overrides : kDefaults)) {
    case WeightOnlyKernel::kTiled:
      return weight_only_tiled_cuda(args, s);
    case WeightOnlyKernel::kMma:
      return weight_only_mma_cuda(args, s);
    case WeightOnlyKernel::kDecode:
      return weight_only_decode_cuda(args, s);
    case WeightOnlyKernel::kGeneric:
      break;
  }
  const dim3 block(kTile, kTile);
  const dim3 grid(unsigned((args.n + kTile - 1) / kTile), unsigned((args.m + kTile - 1) / kTile));
  weight_only_kernel<<<grid, block, 0, s>>>(args);
  FP8KIT_CHECK_LAUNCH(s, "weight_only_kernel");
}

}  // namespace fp8kit::ops
