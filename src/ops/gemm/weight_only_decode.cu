// weight_only_decode: weight_only_mm (W8A16) for M <= 8 rows as one stream over the FP8 weights
// on CUDA cores: the decode step of a model on a GPU without FP8 tensor cores (sm_80/86, or
// FP8KIT_FORCE_WEIGHT_ONLY=1), where the weight bytes are the whole cost.
//
// Reference: weight_only_mm_ref (src/ops/gemm/weight_only_ref.cpp); same per-product rounding
//   w_dq = fl32(decode(w) * s_w), acc = sum fma(x, w_dq), y = round_out(fl32(acc + bias)),
// summed in another order (lane-strided partial sums, then a warp butterfly), so results agree
// within f32 reassociation (tests/gpu/test_weight_only_cuda.cpp).
// Floor: N * K weight bytes over the memory bandwidth (a BF16 GEMM of the same shape reads twice
// as many): 4096 x 4096 is 16.8 MB, 3.9 us at the 4.26 TB/s copy ceiling. Each warp owns kRows output rows and streams them in 16-byte
// loads, kSteps loads per row in flight per lane; activations come from L1/L2 (M * K * 2 bytes,
// reused by every warp) in 16-byte loads.
#include <cuda_fp8.h>

#include <cstdint>

#include "core/cuda/cuda_check.h"
#include "fp8kit/half.h"
#include "ops/gemm/weight_only_decode.h"

namespace fp8kit::ops {
namespace {

constexpr int kWarps = 4;   // per CTA
constexpr int kRows = 2;    // output rows per warp
constexpr int kSteps = 4;   // 16-byte weight loads per row and lane in flight
constexpr int kLaneK = 16;  // weights per 16-byte load
constexpr int kWarpK = 32 * kLaneK;

__device__ __forceinline__ uint4 load_streaming(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// Two e4m3 codes -> two exact floats (through f16, which holds every e4m3 value).
__device__ __forceinline__ float2 decode2(uint16_t pair) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3);
  return make_float2(__half2float(__half(__half_raw{h.x})), __half2float(__half(__half_raw{h.y})));
}


template <typename T, int kM>
__global__ void __launch_bounds__(kWarps * 32) weight_only_decode_kernel(const WeightOnlyMmArgs a) {
  const int lane = threadIdx.x % 32;
  const int64_t row0 = (int64_t(blockIdx.x) * kWarps + threadIdx.x / 32) * kRows;
  if (row0 >= a.n) return;
  const T* x = static_cast<const T*>(a.x);
  // Each row's scale (per tensor, per row) or its row of block scales, found once; a step's K
  // block by a 32-bit division (64-bit divisions are subroutine calls, two a row and step before).
  const bool block = a.scale_kind == ScaleKind::kBlock;
  const uint32_t block_k = uint32_t(a.block_k);
  const float* s_rows[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t row = row0 + r < a.n ? row0 + r : row0;
    s_rows[r] = a.scale_kind == ScaleKind::kTensor ? a.scale
                : a.scale_kind == ScaleKind::kRow  ? a.scale + row
                                                   : a.scale + (row / a.block_n) * a.s_row_stride;
  }
  float acc[kRows][kM] = {};
  for (int64_t k_base = 0; k_base < a.k; k_base += int64_t(kSteps) * kWarpK) {
    uint4 w[kRows][kSteps];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
#pragma unroll
      for (int s = 0; s < kSteps; ++s) {
        const int64_t k = k_base + s * kWarpK + lane * kLaneK;
        w[r][s] = (row0 + r < a.n && k < a.k) ? load_streaming(a.w + (row0 + r) * a.ldw + k) : make_uint4(0, 0, 0, 0);
      }
    }
    // Every loop below is fully unrolled with compile-time indices (a data-dependent `break` would
    // push acc / w / wd into local memory); steps past K and rows past M are predicated off.
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
      const int64_t k = k_base + s * kWarpK + lane * kLaneK;
      const bool k_valid = k < a.k;
      // This lane's 16 weights of each row, dequantized as the reference does (zero past K).
      float wd[kRows][kLaneK];
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const float sc = !(row0 + r < a.n && k_valid) ? 0.0f
                         : block                        ? s_rows[r][int64_t(uint32_t(k) / block_k) * a.s_col_stride]
                                                        : *s_rows[r];
        const uint32_t words[4] = {w[r][s].x, w[r][s].y, w[r][s].z, w[r][s].w};
#pragma unroll
        for (int q = 0; q < 8; ++q) {
          const float2 v = decode2(uint16_t(words[q / 2] >> (16 * (q % 2))));
          wd[r][2 * q] = __fmul_rn(v.x, sc);
          wd[r][2 * q + 1] = __fmul_rn(v.y, sc);
        }
      }
#pragma unroll
      for (int m = 0; m < kM; ++m) {
        // 16 activations in two 16-byte loads (L1-resident: every warp of the SM reads them).
        uint4 lo = make_uint4(0, 0, 0, 0), hi = lo;
        if (k_valid && m < a.m) {
          const uint4* xr = reinterpret_cast<const uint4*>(x + m * a.ldx + k);
          lo = xr[0];
          hi = xr[1];
        }
        const uint32_t xw[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
        for (int e = 0; e < kLaneK; ++e) {
          const uint16_t bits = uint16_t(xw[e / 2] >> (16 * (e % 2)));
          const float xv = to_float(*reinterpret_cast<const T*>(&bits));
#pragma unroll
          for (int r = 0; r < kRows; ++r) acc[r][m] = __fmaf_rn(xv, wd[r][e], acc[r][m]);
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int m = 0; m < kM; ++m) {
      float v = acc[r][m];
#pragma unroll
      for (int off = 16; off > 0; off /= 2) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, off));
      acc[r][m] = v;
    }
  }
  if (lane != 0) return;
  T* out = static_cast<T*>(a.out);
  const T* bias = static_cast<const T*>(a.bias);
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t j = row0 + r;
#pragma unroll
    for (int m = 0; m < kM; ++m) {
      if (j >= a.n || m >= a.m) continue;
      const float y = bias != nullptr ? __fadd_rn(acc[r][m], to_float(bias[j])) : acc[r][m];
      out[m * a.ldc + j] = from_float<T>(y);
    }
  }
}

template <typename T>
void launch(const WeightOnlyMmArgs& a, cudaStream_t s) {
  const int64_t rows_per_cta = int64_t(kWarps) * kRows;
  const dim3 grid(unsigned((a.n + rows_per_cta - 1) / rows_per_cta)), block(kWarps * 32);
  if (a.m <= 1) {
    weight_only_decode_kernel<T, 1><<<grid, block, 0, s>>>(a);
  } else if (a.m <= 2) {
    weight_only_decode_kernel<T, 2><<<grid, block, 0, s>>>(a);
  } else if (a.m <= 4) {
    weight_only_decode_kernel<T, 4><<<grid, block, 0, s>>>(a);
  } else {
    weight_only_decode_kernel<T, 8><<<grid, block, 0, s>>>(a);
  }
  FP8KIT_CHECK_LAUNCH(s, "weight_only_decode_kernel");
}

}  // namespace

bool weight_only_decode_serves(const WeightOnlyMmArgs& a) {
  const auto aligned16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return a.m >= 1 && a.m <= kWeightOnlyDecodeMaxM && a.k % kLaneK == 0 && a.k <= 0x7fffffff && a.ldw % 16 == 0 &&
         aligned16(a.w) && a.ldx % 8 == 0 && aligned16(a.x) &&
         (a.scale_kind != ScaleKind::kBlock || a.block_k % kLaneK == 0);
}

void weight_only_decode_cuda(const WeightOnlyMmArgs& a, cudaStream_t s) {
  if (a.act_dtype == DType::kBF16) {
    launch<BFloat16>(a, s);
  } else {
    launch<Float16>(a, s);
  }
}

}  // namespace fp8kit::ops
