// Hopper warpgroup MMA (wgmma.mma_async, sm_90a only) for FP8 e4m3 x e4m3 -> f32, both operands
// K-major in shared memory with the 128-byte swizzle, and the fences around it. PTX ISA sections
// "Asynchronous Warpgroup Level Matrix Multiply-Accumulate" and "Matrix Descriptor Format".
//
// Shared-memory tile: rows of 128 bytes (128 e4m3 values along K), the tile 1024-byte aligned;
// the 16-byte chunk c of row r is stored at chunk c ^ (r % 8) of that row (swizzle_128b_offset).
// A wgmma reads 32 K values (32 bytes) of each row; the k-th step starts 32 * k bytes into the
// rows (the hardware applies the swizzle to the address it computes).
//
// Accumulator fragment of m64nNk32 (N / 2 floats a thread): warp w of the warpgroup owns rows
// 16 w .. 16 w + 15; with g = lane / 4, t = lane % 4, d[4 j + 0..3] are (row g, col 8 j + 2 t),
// (row g, col 8 j + 2 t + 1), (row g + 8, col 8 j + 2 t), (row g + 8, col 8 j + 2 t + 1).
#pragma once

#include <cstdint>

// wgmma exists only on sm_90a; other targets compile these to nothing (callers are guarded too).
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FP8KIT_WGMMA_ASM(...) asm volatile(__VA_ARGS__)
#else
#define FP8KIT_WGMMA_ASM(...) ((void)0)
#endif

namespace fp8kit::cuda {

// Byte offset of (row r, byte b) in a 128-byte-swizzled tile; b a multiple of 16.
__device__ __forceinline__ uint32_t swizzle_128b_offset(uint32_t r, uint32_t b) {
  return r * 128u + ((((b >> 4) ^ (r & 7u)) & 7u) << 4);
}

// Matrix descriptor of a K-major 128-byte-swizzled tile at shared address `smem_addr`:
// start address >> 4 (bits 0-13), leading byte offset unused for this layout (1), stride byte
// offset 1024 B between 8-row groups (bits 32-45, >> 4), layout type 1 = 128B swizzle (bits 62-63).
__device__ __forceinline__ uint64_t wgmma_desc_sw128(uint32_t smem_addr) {
  return uint64_t((smem_addr & 0x3FFFFu) >> 4) | (uint64_t(1) << 16) | (uint64_t(1024 >> 4) << 32) |
         (uint64_t(1) << 62);
}

__device__ __forceinline__ void wgmma_fence() { FP8KIT_WGMMA_ASM("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { FP8KIT_WGMMA_ASM("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  FP8KIT_WGMMA_ASM("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Generic-proxy writes to shared memory (st.shared, cp.async) become visible to wgmma's async proxy.
// Stores four 8 x 8 matrices of 16-bit values from the MMA fragment layout (register i of lane l:
// row l / 4, columns 2 (l % 4) + {0, 1} of matrix i) to shared memory, lane l giving the address
// of row l % 8 of matrix l / 8 (16 bytes).
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  FP8KIT_WGMMA_ASM("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0), "r"(r1), "r"(r2),
                   "r"(r3)
                   : "memory");
}
__device__ __forceinline__ void fence_proxy_async_shared() { FP8KIT_WGMMA_ASM("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// Keeps the compiler from moving reads or writes of accumulator registers across wgmma_wait.
template <int kN>
__device__ __forceinline__ void wgmma_fence_operands(float (&d)[kN]) {
#pragma unroll
  for (int i = 0; i < kN; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Warpgroup register budgets (setmaxnreg): a producer warpgroup gives registers up, consumer
// warpgroups take them; the counts of a CTA must add up to what it was launched with.
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  FP8KIT_WGMMA_ASM("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  FP8KIT_WGMMA_ASM("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

#define FP8KIT_WGMMA_D8(i) \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])

// d (+)= A(64 x 32, desc_a) * B(N x 32, desc_b)^T; accumulate false overwrites d.
template <int N>
__device__ __forceinline__ void wgmma_e4m3(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, bool accumulate);

template <>
__device__ __forceinline__ void wgmma_e4m3<8>(float (&d)[4], uint64_t desc_a, uint64_t desc_b, bool accumulate) {
  FP8KIT_WGMMA_ASM(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3}, %4, %5, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "l"(desc_a), "l"(desc_b), "r"(int(accumulate)));
}

template <>
__device__ __forceinline__ void wgmma_e4m3<16>(float (&d)[8], uint64_t desc_a, uint64_t desc_b, bool accumulate) {
  FP8KIT_WGMMA_ASM(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1;\n}\n"
      : FP8KIT_WGMMA_D8(0)
      : "l"(desc_a), "l"(desc_b), "r"(int(accumulate)));
}

template <>
__device__ __forceinline__ void wgmma_e4m3<32>(float (&d)[16], uint64_t desc_a, uint64_t desc_b, bool accumulate) {
  FP8KIT_WGMMA_ASM(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1;\n}\n"
      : FP8KIT_WGMMA_D8(0), FP8KIT_WGMMA_D8(8)
      : "l"(desc_a), "l"(desc_b), "r"(int(accumulate)));
}

template <>
__device__ __forceinline__ void wgmma_e4m3<64>(float (&d)[32], uint64_t desc_a, uint64_t desc_b, bool accumulate) {
  FP8KIT_WGMMA_ASM(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1;\n}\n"
      : FP8KIT_WGMMA_D8(0), FP8KIT_WGMMA_D8(8), FP8KIT_WGMMA_D8(16), FP8KIT_WGMMA_D8(24)
      : "l"(desc_a), "l"(desc_b), "r"(int(accumulate)));
}

template <>
__device__ __forceinline__ void wgmma_e4m3<128>(float (&d)[64], uint64_t desc_a, uint64_t desc_b, bool accumulate) {
  FP8KIT_WGMMA_ASM(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1;\n}\n"
      : FP8KIT_WGMMA_D8(0), FP8KIT_WGMMA_D8(8), FP8KIT_WGMMA_D8(16), FP8KIT_WGMMA_D8(24), FP8KIT_WGMMA_D8(32),
        FP8KIT_WGMMA_D8(40), FP8KIT_WGMMA_D8(48), FP8KIT_WGMMA_D8(56)
      : "l"(desc_a), "l"(desc_b), "r"(int(accumulate)));
}

template <>
__device__ __forceinline__ void wgmma_e4m3<256>(float (&d)[128], uint64_t desc_a, uint64_t desc_b, bool accumulate) {
  FP8KIT_WGMMA_ASM(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
      "%128, %129, p, 1, 1;\n}\n"
      : FP8KIT_WGMMA_D8(0), FP8KIT_WGMMA_D8(8), FP8KIT_WGMMA_D8(16), FP8KIT_WGMMA_D8(24), FP8KIT_WGMMA_D8(32),
        FP8KIT_WGMMA_D8(40), FP8KIT_WGMMA_D8(48), FP8KIT_WGMMA_D8(56), FP8KIT_WGMMA_D8(64), FP8KIT_WGMMA_D8(72),
        FP8KIT_WGMMA_D8(80), FP8KIT_WGMMA_D8(88), FP8KIT_WGMMA_D8(96), FP8KIT_WGMMA_D8(104), FP8KIT_WGMMA_D8(112),
        FP8KIT_WGMMA_D8(120)
      : "l"(desc_a), "l"(desc_b), "r"(int(accumulate)));
}

#undef FP8KIT_WGMMA_D8

}  // namespace fp8kit::cuda
