// Building blocks of the quantization kernels (quant_kernels.cuh, quant_weight_kernels.cuh):
// runs of 8 or 16 elements held as 32-bit words and moved with 16-byte accesses (or element by
// element where a run is partial or misaligned), packed FP8 codes, grid-stride cursors that
// divide once per thread instead of once per step, and max reductions over lanes and blocks.
#pragma once

#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

#include "fp8kit/dtype.h"
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
  // The same maximum as a float: fmaxf(0, |x_0|, |x_1|, ...), NaN ignored. 16-bit elements take
  // a max of the packed magnitude bits, two per instruction (VIMNMX.U16x2), and only when that
  // lands on a NaN pattern, the exact NaN-ignoring absmax_bits(); the elements are not widened
  // here, so the quantization widens them from the raw words again instead of keeping N floats
  // live across the reduction (which doubled the registers of the row and tile kernels). f32
  // elements take fmaxf, which ignores NaN.
  __device__ __forceinline__ float absmax() const {
    if constexpr (sizeof(T) == 2) {
      constexpr uint32_t kLargestFinite = DTypeOf<T>::value == DType::kBF16 ? 0x7f80u : 0x7c00u;  // inf
      uint32_t m = 0;
#pragma unroll
      for (int i = 0; i < kWords; ++i) m = __vmaxu2(m, w[i] & 0x7fff7fffu);
      uint32_t top = max(m & 0xffffu, m >> 16);
      if (top > kLargestFinite) top = absmax_bits();  // a NaN in the run
      return abs_bits_to_float(top, T{});
    } else {
      float m = 0.0f;
#pragma unroll
      for (int i = 0; i < N; ++i) m = fmaxf(m, fabsf(get_float(i)));
      return m;
    }
  }
};

// N FP8 codes packed four to a word, code 0 in the low byte.
template <int N>
struct Codes {
  static_assert(N == 8 || N % 16 == 0, "8 codes or whole 16-byte vectors");
  uint32_t w[N / 4];

  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int i = 0; i < N / 4; ++i) w[i] = 0;
  }
  __device__ __forceinline__ void store_vector(uint8_t* p) const {  // p: min(N, 16)-byte aligned
    if constexpr (N % 16 == 0) {
#pragma unroll
      for (int i = 0; i < N / 16; ++i) {
        reinterpret_cast<uint4*>(p)[i] = make_uint4(w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]);
      }
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

// The clamp bound FP8_MAX of a launch, with what the element and scale steps derive from it once
// per thread: whether it is the format's top value (quantize_fp8x4's kTopMax: one clamp instead
// of two) and its reciprocal (divide_by_fp8_max).
struct Fp8Max {
  float value, reciprocal;
  bool top;
};
template <typename F>
__device__ __forceinline__ Fp8Max make_fp8_max(float value) {
  return {value, __frcp_rn(value), max_is_top<F>(value)};
}

// fl(a / FP8_MAX) for a >= 0 (the scale rules' dividend; inf allowed): Markstein's sequence of
// divide_with_reciprocal where every intermediate is normal, which makes it the IEEE quotient
// (a in [2^-90, FLT_MAX] and FP8_MAX in [1, 2^16]: checked on every float of the binades 2^-90
// and 2^127 for 448 and 224, and scaling a by 2 scales every step exactly); __fdiv_rn elsewhere.
// About 7 instructions instead of a division's ~12 and its slow-path branch.
__device__ __forceinline__ float divide_by_fp8_max(float a, const Fp8Max& m) {
  const bool regular = a >= 0x1p-90f && a <= FLT_MAX && m.value >= 1.0f && m.value <= 0x1p16f;
  return regular ? divide_with_reciprocal(a, m.value, m.reciprocal) : __fdiv_rn(a, m.value);
}

// Codes of cvt(clamp(op(x_i))) for a run; kTopMax as quantize_fp8x4.
template <typename F, bool kTopMax, typename T, int N, typename Op>
__device__ __forceinline__ Codes<N> quantize_run(const Elems<T, N>& x, float fp8_max, Op op) {
  Codes<N> q;
#pragma unroll
  for (int i = 0; i < N / 4; ++i) {
    q.w[i] = quantize_fp8x4<F, kTopMax>(op(x.get_float(4 * i)), op(x.get_float(4 * i + 1)),
                                        op(x.get_float(4 * i + 2)), op(x.get_float(4 * i + 3)), fp8_max);
  }
  return q;
}
// The same with the clamp picked at run time (a uniform branch: every thread has the same max).
template <typename F, typename T, int N, typename Op>
__device__ __forceinline__ Codes<N> quantize_run(const Elems<T, N>& x, const Fp8Max& m, Op op) {
  return m.top ? quantize_run<F, true>(x, m.value, op) : quantize_run<F, false>(x, m.value, op);
}

// q_i = cvt(clamp(x_i * inv)): spec 2.2 rule 1. __fmul_rn keeps the product a rounded product
// (never contracted into a neighbouring add).
template <typename F, typename T, int N>
__device__ __forceinline__ Codes<N> quantize_mul(const Elems<T, N>& x, float inv, const Fp8Max& m) {
  return quantize_run<F>(x, m, [inv](float v) { return __fmul_rn(v, inv); });
}

// A scale to divide by: s, its reciprocal and whether divide_with_reciprocal is exact for the
// run it divides (quant_encode.h). Built once per row, group or tile from the run's absmax.
// __frcp_rn is the IEEE reciprocal, the same value as 1.0f / s with fewer instructions.
struct Divisor {
  float s, z;
  bool regular;
};
__device__ __forceinline__ Divisor make_divisor(float s, float amax) {
  const float z = __frcp_rn(s);
  return {s, z, divisor_is_regular(s, z, amax)};
}

// q_i = cvt(clamp(x_i / s)): spec 2.2 rules 3 and 4, IEEE division (computed with the hoisted
// reciprocal where that is exact, with __fdiv_rn otherwise).
template <typename F, typename T, int N>
__device__ __forceinline__ Codes<N> quantize_div(const Elems<T, N>& x, const Divisor& d, const Fp8Max& m) {
  if (d.regular) {
    const float s = d.s, z = d.z;
    return quantize_run<F>(x, m, [s, z](float v) { return divide_with_reciprocal(v, s, z); });
  }
  const float s = d.s;
  return quantize_run<F>(x, m, [s](float v) { return __fdiv_rn(v, s); });
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
