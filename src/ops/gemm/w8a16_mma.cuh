// The W8A16 building blocks of the weight-only kernels (weight_only_mma.cu, weight_only_tiled.cu):
// FP8 weights widened to bf16 / f16 in registers, ldmatrix and the 16-bit tensor-core MMA
// (mma.sync m16n8k16, f32 accumulation, sm_80+).
//
// FP8 -> 16-bit without FP8 hardware (sm_80): e4m3 bits s.eeee.mmm placed as bf16 s.0eeee.mmm0000
// (or f16 s.0eeee.mmm0000000) are the value times 2^-120 (2^-8); one exact multiply by 2^120 (2^8)
// restores it, subnormals included. The NaN codes (0x7f, 0xff), which fp8kit's quantizers never
// write, read as +-480 here (vLLM's Marlin conversion does the same).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "core/cuda/cuda_check.h"
#include "fp8kit/half.h"
#include "ops/gemm/gemm_args.h"

namespace fp8kit::ops::w8a16 {

struct Bf16Tag {
  static constexpr bool kIsBf16 = true;
  using Storage = BFloat16;
};
struct F16Tag {
  static constexpr bool kIsBf16 = false;
  using Storage = Float16;
};

// Bytes 0 and 1 of `word` (e4m3) -> a pair of bf16 / f16 in one 32-bit register (byte 0 low).
template <typename Tag>
__device__ __forceinline__ uint32_t widen_pair(uint32_t word, bool high) {
  const uint32_t spread = __byte_perm(word, 0, high ? 0x4342 : 0x4140);  // b_lo | b_hi << 16
  if constexpr (Tag::kIsBf16) {
    const uint32_t bits = ((spread << 8) & 0x80008000u) | ((spread << 4) & 0x07F007F0u);
    __nv_bfloat162 v = *reinterpret_cast<const __nv_bfloat162*>(&bits);
    v = __hmul2(v, __floats2bfloat162_rn(0x1p120f, 0x1p120f));
    return *reinterpret_cast<const uint32_t*>(&v);
  } else {
    const uint32_t bits = ((spread << 8) & 0x80008000u) | ((spread << 7) & 0x3F803F80u);
    __half2 v = *reinterpret_cast<const __half2*>(&bits);
    v = __hmul2(v, __floats2half2_rn(256.0f, 256.0f));
    return *reinterpret_cast<const uint32_t*>(&v);
  }
}

// Four 8 x 8 matrices of 16-bit values from shared memory (lanes 8 q .. 8 q + 7 address the rows
// of matrix q): r[q] holds row lane / 4, elements 2 (lane % 4) and + 1 of matrix q.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

// d += a b (m16n8k16, row.col, f32 accumulators); a register-only instruction, so not volatile
// (the compiler may schedule it among the loads).
template <typename Tag>
__device__ __forceinline__ void mma16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (Tag::kIsBf16) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  } else {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
#endif
}

// What the tensor-core W8A16 kernels ask of every problem: sm_80+, K a multiple of 16 (whole
// 16-byte weight loads) and below 2^31, 16-byte aligned weight and activation rows.
inline bool operands_ok(const WeightOnlyMmArgs& a, int device) {
  int major = 0;
  FP8KIT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  const auto aligned16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return major >= 8 && a.m >= 1 && a.n >= 1 && a.k % 16 == 0 && a.k <= 0x7fffffff && a.ldw % 16 == 0 && aligned16(a.w) &&
         a.ldx % 8 == 0 && aligned16(a.x);
}

// Calls launch(Bf16Tag{}) or launch(F16Tag{}) for the activation dtype.
template <typename Launch>
void with_act_tag(DType act_dtype, Launch&& launch) {
  if (act_dtype == DType::kBF16) {
    launch(Bf16Tag{});
  } else {
    launch(F16Tag{});
  }
}

}  // namespace fp8kit::ops::w8a16
