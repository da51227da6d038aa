// The generic scaled_mm kernel: any M, N, K, strides, scalings and block sizes, bit-for-bit the
// same epilogue as the CPU reference (gemm_ref.cpp) with float accumulation. It serves what the
// fast backends cannot (ragged or misaligned shapes, odd block sizes, GPUs without FP8 tensor
// cores) and is the cross-check of the fast backends in the GPU tests. CUDA cores, 16 x 16 outputs
// per block: about 2 flop per 2 shared loads, far from any roofline; correctness only.
#include "core/cuda/cuda_check.h"
#include "fp8kit/fp8.h"
#include "fp8kit/half.h"
#include "ops/gemm/gemm_fallback.h"

namespace fp8kit::ops {
namespace {

constexpr int kTile = 16, kDepth = 32;

__device__ __forceinline__ void store_out(const ScaledMmArgs& a, int64_t i, int64_t j, float v) {
  switch (a.out_dtype) {
    case DType::kBF16: static_cast<BFloat16*>(a.out)[i * a.ldc + j] = float_to_bf16(v); break;
    case DType::kF16: static_cast<Float16*>(a.out)[i * a.ldc + j] = float_to_f16(v); break;
    default: static_cast<float*>(a.out)[i * a.ldc + j] = v; break;
  }
}

__device__ __forceinline__ float load_bias(const ScaledMmArgs& a, int64_t j) {
  if (a.bias == nullptr) return 0.0f;
  switch (a.out_dtype) {
    case DType::kBF16: return bf16_to_float(static_cast<const BFloat16*>(a.bias)[j]);
    case DType::kF16: return f16_to_float(static_cast<const Float16*>(a.bias)[j]);
    default: return static_cast<const float*>(a.bias)[j];
  }
}

__global__ void gemm_fallback_kernel(const ScaledMmArgs args) {
  __shared__ float table[256];
  __shared__ float a_tile[kTile][kDepth + 1], b_tile[kTile][kDepth + 1];
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * kTile + tx;
  table[tid] = e4m3fn_bits_to_float(uint8_t(tid));
  const int64_t i = int64_t(blockIdx.y) * kTile + ty;  // output row (a row)
  const int64_t j = int64_t(blockIdx.x) * kTile + tx;  // output column (b row)
  const bool block = args.scale_a_kind == ScaleKind::kBlock;
  float partial = 0.0f, total = 0.0f;
  int64_t kb = 0;
  // The scale product of the K-block just finished, added in the reference's order.
  auto flush = [&]() {
    if (i < args.m && j < args.n) {
      const float sa = args.scale_a[i * args.sa_row_stride + kb * args.sa_group_stride];
      const float sb = args.scale_b[(j / args.block_n) * args.sb_row_stride + kb * args.sb_group_stride];
      total = __fadd_rn(total, __fmul_rn(__fmul_rn(partial, sa), sb));
    }
    partial = 0.0f;
    ++kb;
  };
  for (int64_t k0 = 0; k0 < args.k; k0 += kDepth) {
    __syncthreads();  // table ready; previous tiles consumed
    for (int e = tid; e < kTile * kDepth; e += kTile * kTile) {
      const int r = e / kDepth, c = e % kDepth;
      const int64_t kk = k0 + c;
      const int64_t ai = int64_t(blockIdx.y) * kTile + r, bj = int64_t(blockIdx.x) * kTile + r;
      a_tile[r][c] = (ai < args.m && kk < args.k) ? table[args.a[ai * args.lda + kk]] : 0.0f;
      b_tile[r][c] = (bj < args.n && kk < args.k) ? table[args.b[bj * args.ldb + kk]] : 0.0f;
    }
    __syncthreads();
    for (int c = 0; c < kDepth && k0 + c < args.k; ++c) {
      if (block && k0 + c > 0 && (k0 + c) % args.block_k == 0) flush();
      partial = __fadd_rn(partial, __fmul_rn(a_tile[ty][c], b_tile[tx][c]));
    }
  }
  if (i >= args.m || j >= args.n) return;
  float y;
  if (block) {
    flush();
    y = __fadd_rn(total, load_bias(args, j));
  } else {
    const float sa = args.scale_a_kind == ScaleKind::kTensor ? args.scale_a[0] : args.scale_a[i];
    const float sb = args.scale_b_kind == ScaleKind::kTensor ? args.scale_b[0] : args.scale_b[j];
    y = __fmaf_rn(sa, __fmul_rn(sb, partial), load_bias(args, j));
  }
  store_out(args, i, j, y);
}

}  // namespace

void scaled_mm_fallback(const ScaledMmArgs& args, cudaStream_t stream) {
  const dim3 block(kTile, kTile);
  const dim3 grid(unsigned((args.n + kTile - 1) / kTile), unsigned((args.m + kTile - 1) / kTile));
  gemm_fallback_kernel<<<grid, block, 0, stream>>>(args);
  FP8KIT_CHECK_LAUNCH(stream, "gemm_fallback_kernel");
}

}  // namespace fp8kit::ops
