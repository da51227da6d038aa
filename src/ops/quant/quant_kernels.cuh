// __global__ kernels of the activation quantization ops: scaled_fp8_quant (static, dynamic
// per-tensor, dynamic per-token) and per_token_group_quant. Reference: quant_ref.cpp, bit-exact
// on the same args (tests/gpu/test_quant_*.cpp). All are memory-bound; the floor of a call is
// (bytes read + bytes written) / bandwidth: 64 MiB of bf16 to 32 MiB of e4m3 is 96 MiB, 23.6 us at
// the H200's 4.27 TB/s copy rate; dynamic per-tensor reads its input twice (160 MiB, 39 us).
#pragma once

#include "core/cuda/grid_barrier.cuh"
#include "core/cuda/pdl.cuh"
#include "ops/quant/quant_kernel_util.cuh"

namespace fp8kit::ops::kernels {

// ---- per-tensor scale: absmax, then quantize ------------------------------------------------

// A [rows, cols] region of elements (in_col_stride 1 when vec). A contiguous tensor is passed as
// one row of m * k elements, so its rows need not be 16-byte aligned.
struct AbsmaxParams {
  const void* in;
  int64_t row_stride, col_stride;
  int64_t rows, cols;
  bool vec;  // whole chunks are 16-byte aligned: load them as vectors
  float fp8_max;
  float* result;  // atomicMax of fl(block absmax / fp8_max) as int bits; zero before the launch
};

// Spec 2.2 rule 2: fl(max|x| / FP8_MAX), NaN ignored. Division is monotonic, so the max over
// blocks of fl(block max / FP8_MAX) equals fl(max / FP8_MAX); the values are >= 0, so their
// float bits order as ints.
// The max of |x| (as absmax_bits) over the chunks first, first + step, ... of the region.
template <typename T>
__device__ __forceinline__ uint32_t absmax_bits_of(const AbsmaxParams& p, int64_t first, int64_t step) {
  const T* in = static_cast<const T*>(p.in);
  const int64_t per_row = ceil_div(p.cols, kChunk);
  uint32_t m = 0;
  if (first >= p.rows * per_row) return m;
  for (GridCursor c(first, step, per_row); c.row < p.rows; c.next()) {
    const int64_t c0 = c.col * kChunk;
    Elems<T, kChunk> e;
    e.load(in + c.row * p.row_stride + c0 * p.col_stride, p.col_stride, run_length(p.cols - c0, kChunk), p.vec);
    m = max(m, e.absmax_bits());
  }
  return m;
}

template <typename T>
__global__ void __launch_bounds__(kThreads) absmax_kernel(const AbsmaxParams p) {
  cuda::pdl_wait();  // launched by launch_pdl (core/cuda/pdl.cuh)
  cuda::pdl_allow_dependents();
  __shared__ uint32_t reduce_buffer[kWarps];
  // No early return: every thread reaches block_max.
  const uint32_t m = block_max(absmax_bits_of<T>(p, global_thread(), grid_threads()), reduce_buffer);
  if (threadIdx.x == 0) {
    const float r = __fdiv_rn(abs_bits_to_float(m, T{}), p.fp8_max);
    atomicMax(reinterpret_cast<int*>(p.result), __float_as_int(r));
  }
}

// Output [rows, cols] (out_row_stride); output element (r, c) quantizes input element (r, c)
// when r < in_rows and c < in_cols and is a zero code otherwise (padding rows; in the one-row
// form of a contiguous tensor, the padding is the tail past in_cols = m * k).
struct PerTensorQuantParams {
  const void* in;
  int64_t in_row_stride, in_col_stride;
  uint8_t* out;
  int64_t out_row_stride;
  int64_t rows, cols, in_rows, in_cols;
  // scaled_fp8_quant: the scale s itself. Weights: fl(amax / FP8_MAX), from which the kernel
  // derives s = weight_scale(...) (quant_weight_ref.cpp).
  const float* scale;
  bool weight_scale_rule, ue8m0;
  float fp8_max;
  bool vec_in, vec_out;
  // Walk the chunks last to first: after absmax_kernel walked them first to last, the tail it
  // read last is the part still in L2.
  bool reverse;
};

// Spec 2.2 rule 1: q = cvt(clamp(x * (1 / s))); s == 0 gives zero codes (spec 2.9 H2, as the
// reference's memset).
// The chunks first, first + step, ... of the output with the scale s.
template <typename T, typename F>
__device__ __forceinline__ void quantize_per_tensor(const PerTensorQuantParams& p, float s, int64_t first, int64_t step) {
  const T* in = static_cast<const T*>(p.in);
  if (p.weight_scale_rule) s = weight_scale(s, p.ue8m0);
  const bool zero = s == 0.0f;
  const float inv = __fdiv_rn(1.0f, s);
  const Fp8Max fp8_max = make_fp8_max<F>(p.fp8_max);
  const int64_t per_row = ceil_div(p.cols, kChunk);
  if (first >= p.rows * per_row) return;
  for (GridCursor c(first, step, per_row); c.row < p.rows; c.next()) {
    const int64_t row = p.reverse ? p.rows - 1 - c.row : c.row;
    const int64_t c0 = (p.reverse ? per_row - 1 - c.col : c.col) * kChunk;
    const int n = run_length(p.cols - c0, kChunk);
    int n_in = 0;
    if (!zero && row < p.in_rows) n_in = run_length(p.in_cols - c0, n);
    Codes<kChunk> q;
    if (n_in > 0) {
      Elems<T, kChunk> e;
      e.load(in + row * p.in_row_stride + c0 * p.in_col_stride, p.in_col_stride, n_in, p.vec_in);
      q = quantize_mul<F>(e, inv, fp8_max);
      if (n_in < kChunk) zero_codes_from(q, n_in);
    } else {
      q.zero();
    }
    q.store(p.out + row * p.out_row_stride + c0, n, p.vec_out);
  }
}

template <typename T, typename F>
__global__ void __launch_bounds__(kThreads) per_tensor_quant_kernel(const PerTensorQuantParams p) {
  cuda::pdl_wait();  // launched by launch_pdl (core/cuda/pdl.cuh)
  cuda::pdl_allow_dependents();
  quantize_per_tensor<T, F>(p, __ldg(p.scale), global_thread(), grid_threads());
}

// Dynamic per-tensor scaled_fp8_quant of a small input in one block (launched with one block):
// the absmax of `a`, *a.result = fl(absmax / FP8_MAX) (not zeroed before: written, not merged),
// then the codes of `p` with it. The same bits as absmax_kernel then per_tensor_quant_kernel
// (the max over one block is the max over all), with one launch instead of a memset and two.
template <typename T, typename F>
__global__ void __launch_bounds__(kThreads) small_dynamic_per_tensor_quant_kernel(const AbsmaxParams a,
                                                                                 const PerTensorQuantParams p) {
  cuda::pdl_wait();  // launched by launch_pdl (core/cuda/pdl.cuh)
  cuda::pdl_allow_dependents();
  __shared__ uint32_t reduce_buffer[kWarps];
  const uint32_t m = block_max(absmax_bits_of<T>(a, threadIdx.x, blockDim.x), reduce_buffer);
  const float s = __fdiv_rn(abs_bits_to_float(m, T{}), a.fp8_max);
  if (threadIdx.x == 0) *a.result = s;
  quantize_per_tensor<T, F>(p, s, threadIdx.x, blockDim.x);
}


// Dynamic per-tensor scaled_fp8_quant of a mid-sized input in one launch of at most one block a
// multiprocessor: the blocks' absmax into *a.result (and the counter right after it, both zeroed
// before), a grid barrier (core/cuda/grid_barrier.cuh), then the codes of `p` with the scale,
// the input read again from L2. The same bits as absmax_kernel then per_tensor_quant_kernel.
// Launched cooperatively (grid_barrier.cuh): every block is resident before any waits; the next
// kernel's blocks, launched with PDL, start only after all of this grid's pdl_allow_dependents.
template <typename T, typename F>
__global__ void __launch_bounds__(kThreads) grid_dynamic_per_tensor_quant_kernel(const AbsmaxParams a,
                                                                                const PerTensorQuantParams p,
                                                                                uint32_t* counter) {
  cuda::pdl_wait();  // launched by launch_pdl (core/cuda/pdl.cuh)
  cuda::pdl_allow_dependents();
  __shared__ uint32_t reduce_buffer[kWarps];
  __shared__ float block_scale;
  const uint32_t m = block_max(absmax_bits_of<T>(a, global_thread(), grid_threads()), reduce_buffer);
  if (threadIdx.x == 0) {
    atomicMax(reinterpret_cast<int*>(a.result), __float_as_int(__fdiv_rn(abs_bits_to_float(m, T{}), a.fp8_max)));
    cuda::grid_arrive_and_wait(counter);
    block_scale = __uint_as_float(cuda::load_acquire(reinterpret_cast<const uint32_t*>(a.result)));
  }
  __syncthreads();
  quantize_per_tensor<T, F>(p, block_scale, global_thread(), grid_threads());
}

// ---- one scale per row: dynamic per-token, and per-channel weights ----------------------------

struct RowQuantParams {
  const void* in;
  int64_t in_row_stride, in_col_stride;
  uint8_t* out;
  int64_t out_row_stride;
  float* scale;                  // [out_rows], contiguous
  int64_t rows, out_rows, cols;  // rows [rows, out_rows): zero codes and scale 1 (quant_ref.cpp)
  const float* scale_ub;         // null: no bound
  float fp8_max, floor;          // s = fmaxf(fminf(amax, *ub) / fp8_max, floor)
  bool ue8m0;                    // then s = 2^ceil(log2 s)
  bool vec_in, vec_out;
};

// Spec 2.2 rule 3 (floor = 1 / (FP8_MAX * 512)) and the per-channel weight rule (floor = FLT_MIN).
__device__ __forceinline__ float row_scale(float amax, const RowQuantParams& p, const Fp8Max& fp8_max) {
  const float bounded = p.scale_ub != nullptr ? fminf(amax, __ldg(p.scale_ub)) : amax;
  const float s = fmaxf(divide_by_fp8_max(bounded, fp8_max), p.floor);
  return p.ue8m0 ? ue8m0_round_up(s) : s;
}

// Thread t of a team of `team` threads writes the padding row `row`.
__device__ __forceinline__ void write_padding_row(const RowQuantParams& p, int64_t row, int t, int team) {
  Codes<kChunk> zero;
  zero.zero();
  uint8_t* o = p.out + row * p.out_row_stride;
  for (int64_t c0 = int64_t(t) * kChunk; c0 < p.cols; c0 += int64_t(team) * kChunk) {
    zero.store(o + c0, run_length(p.cols - c0, kChunk), p.vec_out);
  }
  if (t == 0) p.scale[row] = 1.0f;
}

// A team (a warp, or the whole block) per row, the row held in registers between the absmax and
// the quantization: the input is read once. Thread t of the team holds chunks j * kTeam + t,
// j < kSlots, so a warp's loads of one slot are contiguous. Needs cols <= kTeam * kSlots * 16.
// With kPrefetch the team loads its next row before it reduces and quantizes this one, so its
// loads stay in flight through the barrier and the arithmetic (a block per row of 4096 bf16
// otherwise has nothing in flight for about half its time); it doubles the row's registers, so
// only rows of up to 32 registers per thread take it.
template <typename T, typename F, int kTeam, int kSlots, bool kPrefetch>
__global__ void __launch_bounds__(kThreads) row_quant_kernel(const RowQuantParams p) {
  static_assert(kTeam == 32 || kTeam == kThreads, "a warp or the block per row");
  constexpr int kTeams = kThreads / kTeam;
  __shared__ uint32_t reduce_buffer[2][kWarps];
  const T* in = static_cast<const T*>(p.in);
  const int t = threadIdx.x % kTeam;
  const Fp8Max fp8_max = make_fp8_max<F>(p.fp8_max);
  const int64_t row_step = int64_t(gridDim.x) * kTeams;
  Elems<T, kChunk> e[kSlots];
  int n[kSlots];
  auto load_row = [&](int64_t row, Elems<T, kChunk>(&dst)[kSlots], int(&len)[kSlots]) {
    const T* x = in + row * p.in_row_stride;
#pragma unroll
    for (int j = 0; j < kSlots; ++j) {
      const int64_t c0 = (int64_t(j) * kTeam + t) * kChunk;
      len[j] = run_length(p.cols - c0, kChunk);
      dst[j].load(x + c0 * p.in_col_stride, p.in_col_stride, len[j], p.vec_in);
    }
  };
  int64_t row = int64_t(blockIdx.x) * kTeams + threadIdx.x / kTeam;
  if (kPrefetch && row < p.rows) load_row(row, e, n);
  int parity = 0;
  for (; row < p.out_rows; row += row_step) {
    if (row >= p.rows) {  // the same branch for the whole team
      write_padding_row(p, row, t, kTeam);
      continue;
    }
    Elems<T, kChunk> next[kSlots];
    int next_n[kSlots];
    if constexpr (kPrefetch) {
      if (row + row_step < p.rows) load_row(row + row_step, next, next_n);
    } else {
      load_row(row, e, n);
    }
    float m = 0.0f;
#pragma unroll
    for (int j = 0; j < kSlots; ++j) m = fmaxf(m, e[j].absmax());
    if constexpr (kTeam == 32) {
      m = lanes_max_abs<32>(m);
    } else {
      m = block_max_abs(m, reduce_buffer[parity]);
      parity ^= 1;
    }
    const float s = row_scale(m, p, fp8_max);
    if (t == 0) p.scale[row] = s;
    const Divisor d = make_divisor(s, m);
    uint8_t* o = p.out + row * p.out_row_stride;
#pragma unroll
    for (int j = 0; j < kSlots; ++j) {
      if (n[j] > 0) quantize_div<F>(e[j], d, fp8_max).store(o + (int64_t(j) * kTeam + t) * kChunk, n[j], p.vec_out);
    }
    if constexpr (kPrefetch) {
#pragma unroll
      for (int j = 0; j < kSlots; ++j) {
        e[j] = next[j];
        n[j] = next_n[j];
      }
    }
  }
}

// Rows too long for registers: a block per row reads it twice (the second time mostly from L2).
template <typename T, typename F>
__global__ void __launch_bounds__(kThreads) row_quant_looped_kernel(const RowQuantParams p) {
  __shared__ uint32_t reduce_buffer[2][kWarps];
  const T* in = static_cast<const T*>(p.in);
  const int t = threadIdx.x;
  const Fp8Max fp8_max = make_fp8_max<F>(p.fp8_max);
  int parity = 0;
  for (int64_t row = blockIdx.x; row < p.out_rows; row += gridDim.x) {
    if (row >= p.rows) {
      write_padding_row(p, row, t, kThreads);
      continue;
    }
    const T* x = in + row * p.in_row_stride;
    float m = 0.0f;
    for (int64_t c0 = int64_t(t) * kChunk; c0 < p.cols; c0 += int64_t(kThreads) * kChunk) {
      Elems<T, kChunk> e;
      e.load(x + c0 * p.in_col_stride, p.in_col_stride, run_length(p.cols - c0, kChunk), p.vec_in);
      m = fmaxf(m, e.absmax());
    }
    m = block_max_abs(m, reduce_buffer[parity]);
    parity ^= 1;
    const float s = row_scale(m, p, fp8_max);
    if (t == 0) p.scale[row] = s;
    const Divisor d = make_divisor(s, m);
    uint8_t* o = p.out + row * p.out_row_stride;
    for (int64_t c0 = int64_t(t) * kChunk; c0 < p.cols; c0 += int64_t(kThreads) * kChunk) {
      const int n = run_length(p.cols - c0, kChunk);
      Elems<T, kChunk> e;
      e.load(x + c0 * p.in_col_stride, p.in_col_stride, n, p.vec_in);
      quantize_div<F>(e, d, fp8_max).store(o + c0, n, p.vec_out);
    }
  }
}

// ---- per_token_group_quant ------------------------------------------------------------------

struct GroupQuantParams {
  const void* in;
  int64_t in_row_stride;
  uint8_t* out;
  int64_t out_row_stride;
  float* scale;  // group (r, g) at r * scale_row_stride + g * scale_group_stride
  int64_t scale_row_stride, scale_group_stride;
  int64_t rows, groups_per_row, group_size;
  float eps, fp8_max;
  bool ue8m0;
};

// Spec 2.2 rule 4: s = fmaxf(amax, eps) / FP8_MAX, a power of two (rounded up) with ue8m0.
__device__ __forceinline__ float group_scale(float amax, const GroupQuantParams& p, const Fp8Max& fp8_max) {
  const float s = divide_by_fp8_max(fmaxf(amax, p.eps), fp8_max);
  return p.ue8m0 ? ue8m0_round_up(s) : s;
}

// A group of kGroup elements over kLanes = kGroup / kElems lanes, kElems = 64 bytes of input per
// lane (32 f16/bf16 or 16 f32 elements: four 16-byte loads), so the per-group work (a shuffle max
// over log2(kLanes) levels, the scale, its reciprocal, the scale store and the addresses, about
// 100 instructions per lane) is shared by 32 elements of a 16-bit input: 4 lanes per group of
// 128. A warp step covers 32 / kLanes consecutive groups, one per lane. Rows, groups and strides
// are 32-bit unsigned (the launcher checks), addresses 64-bit. Needs 16-byte aligned input and
// output rows.
template <typename T, typename F, int kGroup>
__global__ void __launch_bounds__(kThreads) group_quant_kernel(const GroupQuantParams p) {
  cuda::pdl_wait();  // launched by launch_pdl (core/cuda/pdl.cuh)
  cuda::pdl_allow_dependents();
  constexpr int kElems = 64 / int(sizeof(T));
  constexpr int kLanes = kGroup / kElems;
  static_assert(kLanes >= 1 && kLanes <= 32 && (kLanes & (kLanes - 1)) == 0, "a power-of-two lane count");
  constexpr int kGroupsPerWarp = 32 / kLanes;
  const T* in = static_cast<const T*>(p.in);
  const uint32_t rows = uint32_t(p.rows), gpr = uint32_t(p.groups_per_row);
  const uint32_t in_stride = uint32_t(p.in_row_stride), out_stride = uint32_t(p.out_row_stride);
  const uint32_t scale_row_stride = uint32_t(p.scale_row_stride), scale_group_stride = uint32_t(p.scale_group_stride);
  const Fp8Max fp8_max = make_fp8_max<F>(p.fp8_max);
  const uint32_t lane = threadIdx.x % 32, lane_col = (lane % kLanes) * kElems;
  const uint32_t warp = blockIdx.x * kWarps + threadIdx.x / 32, warps = gridDim.x * kWarps;
  // This lane's group as (row, group), advanced by a whole grid of warps per step: one division
  // when the thread starts, none per step.
  const uint32_t first = warp * kGroupsPerWarp + lane / kLanes, step = warps * kGroupsPerWarp;
  uint32_t row = first / gpr, group = first % gpr;
  const uint32_t step_row = step / gpr, step_group = step % gpr;
  // The warp's first group decides whether the warp goes on, so every lane takes part in every
  // shuffle; lanes past the last group skip their loads and stores.
  while (__shfl_sync(0xffffffffu, row, 0) < rows) {
    const bool valid = row < rows;
    const uint32_t col = group * kGroup + lane_col;
    Elems<T, kElems> e;
    if (valid) {
      e.load_vectors(in + (uint64_t(row) * in_stride + col));
    } else {
      e.load_elements(in, 0, 0);  // zeros
    }
    const float m = lanes_max_abs<kLanes>(e.absmax());
    if (valid) {
      const float s = group_scale(m, p, fp8_max);
      if (lane % kLanes == 0) p.scale[uint64_t(row) * scale_row_stride + uint64_t(group) * scale_group_stride] = s;
      Codes<kElems> q;
      if (s == 0.0f) {
        q.zero();  // eps underflowed: zero codes, as the reference
      } else {
        q = quantize_div<F>(e, make_divisor(s, m), fp8_max);
      }
      q.store_vector(p.out + (uint64_t(row) * out_stride + col));
    }
    row += step_row;
    group += step_group;
    if (group >= gpr) {
      group -= gpr;
      ++row;
    }
  }
}

// Any group size and alignment: a warp per group, two passes over it, element by element.
template <typename T, typename F>
__global__ void __launch_bounds__(kThreads) group_quant_generic_kernel(const GroupQuantParams p) {
  cuda::pdl_wait();  // launched by launch_pdl (core/cuda/pdl.cuh)
  cuda::pdl_allow_dependents();
  const T* in = static_cast<const T*>(p.in);
  const int lane = threadIdx.x % 32;
  const int64_t groups = p.rows * p.groups_per_row;
  for (int64_t i = global_thread() / 32; i < groups; i += grid_threads() / 32) {
    const int64_t row = i / p.groups_per_row, group = i % p.groups_per_row;
    const T* x = in + row * p.in_row_stride + group * p.group_size;
    uint32_t m = 0;
    for (int64_t j = lane; j < p.group_size; j += 32) m = max(m, abs_bits(x[j]));
    m = lanes_max<32>(m);
    const float s = group_scale(abs_bits_to_float(m, T{}), p, make_fp8_max<F>(p.fp8_max));
    if (lane == 0) p.scale[row * p.scale_row_stride + group * p.scale_group_stride] = s;
    uint8_t* q = p.out + row * p.out_row_stride + group * p.group_size;
    for (int64_t j = lane; j < p.group_size; j += 32) {
      q[j] = s == 0.0f ? uint8_t(0) : quantize_fp8<F>(__fdiv_rn(load_float(x[j]), s), p.fp8_max);
    }
  }
}

}  // namespace fp8kit::ops::kernels
