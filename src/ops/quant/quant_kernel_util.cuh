// Building blocks of the quantization kernels (quant_kernels.cuh, quant_weight_kernels.cuh):
// runs of 8 or 16 elements held as 32-bit words and moved with 16-byte accesses (or element by
// element where a run is partial or misaligned), packed FP8 codes, grid-stride cursors that
// divide once per thread instead of once per step, and max reductions over lanes and blocks.
#pragma once

#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

#include "ops/quant/quant_encode.h"

namespace fp8kit::ops::kernels {

constexpr int kThreads = 256;  // threads per block of every kernel here
constexpr int kWarps = kThreads / 32;
constexpr int kChunk = 16;  // elements per thread step: 16 FP8 codes are one 16-byte store

__host__ __device__ constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

__device__ __forceinline__ int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// How many of a run's n elements exist when `remaining` elements are left: clamp(remaining, 0, n).
__device__ __forceinline__ int run_length(int64_t remaining, int n) {
  return remaining <= 0 ? 0 : remaining >= n ? n : int(remaining);
}

// N consecutive elements of T as 32-bit words, element 0 in the low bits of word 0.
template <typename T, int N>
struct Elems {
  static_assert(N * sizeof(T) % 16 == 0, "a run is a whole number of 16-byte vectors");
  static constexpr int kWords = N * int(sizeof(T)) / 4;
  static constexpr int kVectors = kWords / 4;
  uint32_t w[kWords];

  __device__ __forceinline__ T get(int i) const {
    if constexpr (sizeof(T) == 4) {
      return bits_to_float(w[i]);
    } else {
      return T{uint16_t(w[i >> 1] >> ((i & 1) * 16))};
    }
  }
  __device__ __forceinline__ void set(int i, T v) {
    if constexpr (sizeof(T) == 4) {
      w[i] = float_to_bits(v);
    } else {
      const int shift = (i & 1) * 16;
      w[i >> 1] = (w[i >> 1] & ~(0xffffu << shift)) | (uint32_t(v.bits) << shift);
    }
  }
  __device__ __forceinline__ float get_float(int i) const { return load_float(get(i)); }
  __device__ __forceinline__ uint32_t get_abs_bits(int i) const { return abs_bits(get(i)); }

  // 16-byte loads through the read-only path; `p` is 16-byte aligned.
  __device__ __forceinline__ void load_vectors(const T* p) {
    const uint4* v = reinterpret_cast<const uint4*>(p);
#pragma unroll
    for (int i = 0; i < kVectors; ++i) {
      const uint4 x = __ldg(v + i);
      w[4 * i] = x.x;
      w[4 * i + 1] = x.y;
      w[4 * i + 2] = x.z;
      w[4 * i + 3] = x.w;
    }
  }
  // Elements p[i * stride] for i < n; the rest are zero (which no absmax notices).
  __device__ __forceinline__ void load_elements(const T* p, int64_t stride, int n) {
#pragma unroll
    for (int i = 0; i < kWords; ++i) w[i] = 0;
#pragma unroll
    for (int i = 0; i < N; ++i) {
      if (i < n) {
        if constexpr (sizeof(T) == 4) {
          w[i] = float_to_bits(p[i * stride]);
        } else {
          w[i >> 1] |= uint32_t(p[i * stride].bits) << ((i & 1) * 16);
        }
      }
    }
  }
  // The vector form when the run is whole and `vector_ok`, the element form otherwise.
  __device__ __forceinline__ void load(const T* p, int64_t stride, int n, bool vector_ok) {
    if (vector_ok && n == N) {
      load_vectors(p);
    } else {
      load_elements(p, stride, n);
    }
  }
  __device__ __forceinline__ void store(T* p, int n, bool vector_ok) const {
    if (vector_ok && n == N) {
      uint4* v = reinterpret_cast<uint4*>(p);
#pragma unroll
      for (int i = 0; i < kVectors; ++i) v[i] = make_uint4(w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]);
    } else {
#pragma unroll
      for (int i = 0; i < N; ++i) {
        if (i < n) p[i] = get(i);
      }
    }
  }
  // max_i abs_bits(x_i): the NaN-ignoring absmax of quant_encode.h, in T's bits.
  __device__ __forceinline__ uint32_t absmax_bits() const {
    uint32_t m = 0;
#pragma unroll
    for (int i = 0; i < N; ++i) m = max(m, get_abs_bits(i));
    return m;
  }
  // The same maximum as a float, on the floating-point pipe: fmaxf ignores NaN and the widening
  // is exact and monotonic, so fmaxf(0, |x_0|, |x_1|, ...) == abs_bits_to_float(absmax_bits()).
  // Kernels that divide by a scale widen every element anyway.
  __device__ __forceinline__ float absmax() const {
    float m = 0.0f;
#pragma unroll
    for (int i = 0; i < N; ++i) m = fmaxf(m, fabsf(get_float(i)));
    return m;
  }
};

// N FP8 codes packed four to a word, code 0 in the low byte.
template <int N>
struct Codes {
  static_assert(N % 8 == 0, "8 or 16 codes");
  uint32_t w[N / 4];

  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int i = 0; i < N / 4; ++i) w[i] = 0;
  }
  __device__ __forceinline__ void store_vector(uint8_t* p) const {  // p: N-byte aligned
    if constexpr (N == 16) {
      *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
    } else {
      *reinterpret_cast<uint2*>(p) = make_uint2(w[0], w[1]);
    }
  }
  __device__ __forceinline__ void store_elements(uint8_t* p, int n) const {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      if (i < n) p[i] = uint8_t(w[i / 4] >> ((i % 4) * 8));
    }
  }
  __device__ __forceinline__ void store(uint8_t* p, int n, bool vector_ok) const {
    if (vector_ok && n == N) {
      store_vector(p);
    } else {
      store_elements(p, n);
    }
  }
};

// q_i = cvt(clamp(x_i * inv)): spec 2.2 rule 1. __fmul_rn keeps the product a rounded product
// (never contracted into a neighbouring add).
template <typename F, typename T, int N>
__device__ __forceinline__ Codes<N> quantize_mul(const Elems<T, N>& x, float inv, float fp8_max) {
  Codes<N> q;
#pragma unroll
  for (int i = 0; i < N / 4; ++i) {
    q.w[i] = quantize_fp8x4<F>(__fmul_rn(x.get_float(4 * i), inv), __fmul_rn(x.get_float(4 * i + 1), inv),
                               __fmul_rn(x.get_float(4 * i + 2), inv), __fmul_rn(x.get_float(4 * i + 3), inv), fp8_max);
  }
  return q;
}

// A scale to divide by: s, its reciprocal and whether divide_with_reciprocal is exact for the
// run it divides (quant_encode.h). Built once per row, group or tile from the run's absmax.
struct Divisor {
  float s, z;
  bool regular;
};
__device__ __forceinline__ Divisor make_divisor(float s, float amax) {
  const float z = __fdiv_rn(1.0f, s);
  return {s, z, divisor_is_regular(s, z, amax)};
}

// q_i = cvt(clamp(x_i / s)): spec 2.2 rules 3 and 4, IEEE division (computed with the hoisted
// reciprocal where that is exact, with __fdiv_rn otherwise).
template <typename F, typename T, int N>
__device__ __forceinline__ Codes<N> quantize_div(const Elems<T, N>& x, const Divisor& d, float fp8_max) {
  Codes<N> q;
  if (d.regular) {
#pragma unroll
    for (int i = 0; i < N / 4; ++i) {
      q.w[i] = quantize_fp8x4<F>(divide_with_reciprocal(x.get_float(4 * i), d.s, d.z),
                                 divide_with_reciprocal(x.get_float(4 * i + 1), d.s, d.z),
                                 divide_with_reciprocal(x.get_float(4 * i + 2), d.s, d.z),
                                 divide_with_reciprocal(x.get_float(4 * i + 3), d.s, d.z), fp8_max);
    }
  } else {
#pragma unroll
    for (int i = 0; i < N / 4; ++i) {
      q.w[i] =
          quantize_fp8x4<F>(__fdiv_rn(x.get_float(4 * i), d.s), __fdiv_rn(x.get_float(4 * i + 1), d.s),
                            __fdiv_rn(x.get_float(4 * i + 2), d.s), __fdiv_rn(x.get_float(4 * i + 3), d.s), fp8_max);
    }
  }
  return q;
}

// Elements past `n` of a run get code 0 (they stand for padding, or for nothing).
template <int N>
__device__ __forceinline__ void zero_codes_from(Codes<N>& q, int n) {
#pragma unroll
  for (int i = 0; i < N; ++i) {
    if (i >= n) q.w[i / 4] &= ~(0xffu << ((i % 4) * 8));
  }
}

// A grid-stride walk over the items [0, rows * per_row) of a row-major [rows, per_row] grid as
// (row, col) pairs: one 64-bit division when it starts, none per step.
struct GridCursor {
  int64_t row, col, step_row, step_col, per_row;
  __device__ __forceinline__ GridCursor(int64_t start, int64_t step, int64_t per_row_)
      : row(start / per_row_),
        col(start % per_row_),
        step_row(step / per_row_),
        step_col(step % per_row_),
        per_row(per_row_) {}
  __device__ __forceinline__ void next() {
    row += step_row;
    col += step_col;
    if (col >= per_row) {
      col -= per_row;
      ++row;
    }
  }
};

__device__ __forceinline__ int64_t global_thread() { return int64_t(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ __forceinline__ int64_t grid_threads() { return int64_t(gridDim.x) * blockDim.x; }

// Max over aligned groups of kLanes lanes (a power of two up to 32); every lane of the warp
// calls it and gets its group's max.
template <int kLanes>
__device__ __forceinline__ uint32_t lanes_max(uint32_t v) {
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset /= 2) v = max(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Max over the block; every thread calls it and gets the result. `buffer` (kWarps words of
// shared memory) must not be touched again before the block's next __syncthreads: a caller that
// reduces once per loop iteration alternates between two buffers.
__device__ __forceinline__ uint32_t block_max(uint32_t v, uint32_t* buffer) {
  v = lanes_max<32>(v);
  if (threadIdx.x % 32 == 0) buffer[threadIdx.x / 32] = v;
  __syncthreads();
  uint32_t m = buffer[0];
#pragma unroll
  for (int i = 1; i < kWarps; ++i) m = max(m, buffer[i]);
  return m;
}

// The same for maxima of absolute values (non-negative, not NaN): their bits order as the floats.
template <int kLanes>
__device__ __forceinline__ float lanes_max_abs(float v) {
  return __uint_as_float(lanes_max<kLanes>(__float_as_uint(v)));
}
__device__ __forceinline__ float block_max_abs(float v, uint32_t* buffer) {
  return __uint_as_float(block_max(__float_as_uint(v), buffer));
}

// a * b as the CPU reference gets it where it is NaN: the NaN operand, quieted (x86 and Arm keep
// its sign and payload; CUDA arithmetic returns one canonical NaN). With two NaN operands the
// host's pick depends on the compiler's operand order; this takes a.
__device__ __forceinline__ float mul_keeping_nan(float a, float b) {
  if (isnan(a)) return __uint_as_float(__float_as_uint(a) | 0x00400000u);
  if (isnan(b)) return __uint_as_float(__float_as_uint(b) | 0x00400000u);
  return __fmul_rn(a, b);
}

// 2^ceil(log2 s) from the bits of s (never log2f; fp8.h).
__device__ __forceinline__ float ue8m0_round_up(float s) {
  return ue8m0_bits_to_float(float_to_ue8m0_bits(s, E8M0Rounding::kUpward));
}

// Weight scales from r = fl(amax / FP8_MAX): s = fmaxf(r, FLT_MIN), a power of two with ue8m0
// (quant_weight_ref.cpp, weight_scale_from_amax).
__device__ __forceinline__ float weight_scale(float amax_over_max, bool ue8m0) {
  const float s = fmaxf(amax_over_max, FLT_MIN);
  return ue8m0 ? ue8m0_round_up(s) : s;
}

}  // namespace fp8kit::ops::kernels
