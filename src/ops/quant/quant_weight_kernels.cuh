// __global__ kernels of the weight-side ops: block quantization, the per-tensor weight scale,
// dequantize, requantize_with_max_scale and normalize_e4m3fn_to_e4m3fnuz. Reference:
// quant_weight_ref.cpp, bit-exact on the same args (tests/gpu/test_quant_weight_cuda.cpp).
// Memory-bound; floor = (bytes read + bytes written) / bandwidth: a 7168 x 18432 bf16 weight to
// e4m3 in 128 x 128 blocks moves 396 MB, 93 us at 4.27 TB/s. (Per-tensor and per-channel weight
// quantization run the kernels of quant_kernels.cuh.)
#pragma once

#include "fp8kit/dtype.h"
#include "ops/quant/quant_kernel_util.cuh"

namespace fp8kit::ops::kernels {

// ---- block quantization ---------------------------------------------------------------------

struct BlockQuantParams {
  const void* w;  // [n, k], any strides (w_stride_k 1 when vec_in)
  int64_t w_stride_n, w_stride_k;
  uint8_t* out;  // [n, k], contiguous
  float* scale;  // [blocks_n, blocks_k], contiguous
  int64_t n, k, block_n, block_k, blocks_n, blocks_k;
  float fp8_max;
  bool ue8m0;
  bool vec_in, vec_out;
};

// Spec rule of quant_weight_ref.cpp: s = fmaxf(amax / FP8_MAX, FLT_MIN) (a power of two with
// ue8m0) over the valid elements of the block; q = cvt(clamp(w / s)).
__device__ __forceinline__ float block_scale(float amax, const BlockQuantParams& p, const Fp8Max& fp8_max) {
  return weight_scale(divide_by_fp8_max(amax, fp8_max), p.ue8m0);
}

// A block per tile held in registers between its absmax and its quantization (the weight is read
// once). The cpr = block_k / 16 chunks of a tile row go to cpr consecutive threads, so one pass of
// the block covers kThreads / cpr tile rows (8 threads read one 256-byte row of a 128-wide bf16
// tile) and slot j of a thread is the same columns j passes further down: one pointer and one
// stride per thread instead of per-slot addresses. Needs block_k = 16 * 2^i with cpr dividing
// kThreads and block_n * block_k <= kThreads * kSlots * 16; partial edge tiles load and store only
// their valid elements.
//
// The block has nothing in flight between its tile's loads and the next tile's, so what keeps
// memory busy is other resident blocks: the register cap asks for 3 per SM (at most 85
// registers; 4 spilled) when the raw tile is at most 32 registers per thread (128 x 128 of 16-bit
// weights), where the compiler alone took 120 registers and left room for 2.
template <typename T, int kSlots>
constexpr int block_quant_min_blocks() {
  return kSlots * kChunk * int(sizeof(T)) / 4 <= 32 ? 3 : 2;
}
template <typename T, typename F, int kSlots>
__global__ void __launch_bounds__(kThreads, (block_quant_min_blocks<T, kSlots>()))
    block_quant_kernel(const BlockQuantParams p) {
  __shared__ uint32_t reduce_buffer[2][kWarps];
  const T* w = static_cast<const T*>(p.w);
  const Fp8Max fp8_max = make_fp8_max<F>(p.fp8_max);
  const int chunks_per_row = int(p.block_k / kChunk);
  const int rows_per_pass = kThreads / chunks_per_row;
  const int row0 = int(threadIdx.x) / chunks_per_row;  // tile row of slot 0
  const int col = int(threadIdx.x) % chunks_per_row * kChunk;
  const int64_t in_pass_stride = int64_t(rows_per_pass) * p.w_stride_n, out_pass_stride = int64_t(rows_per_pass) * p.k;
  const int64_t tiles = p.blocks_n * p.blocks_k;
  int parity = 0;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t r0 = tile / p.blocks_k * p.block_n, c0 = tile % p.blocks_k * p.block_k;
    const int rows = int(min64(p.block_n, p.n - r0)), cols = int(min64(p.block_k, p.k - c0));
    const int n_col = run_length(cols - col, kChunk);  // the same for every slot
    auto slot_length = [&](int j) { return row0 + j * rows_per_pass < rows ? n_col : 0; };
    const T* x = w + (r0 + row0) * p.w_stride_n + (c0 + col) * p.w_stride_k;
    Elems<T, kChunk> e[kSlots];
#pragma unroll
    for (int j = 0; j < kSlots; ++j) e[j].load(x + j * in_pass_stride, p.w_stride_k, slot_length(j), p.vec_in);
    float m = 0.0f;
#pragma unroll
    for (int j = 0; j < kSlots; ++j) m = fmaxf(m, e[j].absmax());
    m = block_max_abs(m, reduce_buffer[parity]);
    parity ^= 1;
    const float s = block_scale(m, p, fp8_max);
    if (threadIdx.x == 0) p.scale[tile] = s;
    const Divisor d = make_divisor(s, m);
    uint8_t* o = p.out + (r0 + row0) * p.k + c0 + col;
#pragma unroll
    for (int j = 0; j < kSlots; ++j) {
      const int n = slot_length(j);
      if (n > 0) quantize_div<F>(e[j], d, fp8_max).store(o + j * out_pass_stride, n, p.vec_out);
    }
  }
}

// Any block shape, strides and alignment: a block per tile, two passes over it, a warp per tile
// row, element by element.
template <typename T, typename F>
__global__ void __launch_bounds__(kThreads) block_quant_generic_kernel(const BlockQuantParams p) {
  __shared__ uint32_t reduce_buffer[2][kWarps];
  const T* w = static_cast<const T*>(p.w);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t tiles = p.blocks_n * p.blocks_k;
  int parity = 0;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t r0 = tile / p.blocks_k * p.block_n, c0 = tile % p.blocks_k * p.block_k;
    const int64_t rows = min64(p.block_n, p.n - r0), cols = min64(p.block_k, p.k - c0);
    uint32_t m = 0;
    for (int64_t r = warp; r < rows; r += kWarps) {
      const T* x = w + (r0 + r) * p.w_stride_n + c0 * p.w_stride_k;
      for (int64_t c = lane; c < cols; c += 32) m = max(m, abs_bits(x[c * p.w_stride_k]));
    }
    m = block_max(m, reduce_buffer[parity]);
    parity ^= 1;
    const float s = block_scale(abs_bits_to_float(m, T{}), p, make_fp8_max<F>(p.fp8_max));
    if (threadIdx.x == 0) p.scale[tile] = s;
    for (int64_t r = warp; r < rows; r += kWarps) {
      const T* x = w + (r0 + r) * p.w_stride_n + c0 * p.w_stride_k;
      uint8_t* q = p.out + (r0 + r) * p.k + c0;
      for (int64_t c = lane; c < cols; c += 32) {
        q[c] = quantize_fp8<F>(__fdiv_rn(load_float(x[c * p.w_stride_k]), s), p.fp8_max);
      }
    }
  }
}

// The last step of per-tensor weight quantization: absmax_kernel left fl(amax / FP8_MAX) in
// scale[0], per_tensor_quant_kernel derived s from it; now s replaces it.
__global__ void store_weight_scale_kernel(float* scale, bool ue8m0) { scale[0] = weight_scale(scale[0], ue8m0); }

// ---- dequantize -----------------------------------------------------------------------------

// out[r, c] = round_out(decode(q[r, c]) * s[r / block_n, c / block_k]), out [rows, cols]
// contiguous. One block covering everything (per tensor) over a contiguous q is passed as one row
// of n * k elements.
struct DequantParams {
  const uint8_t* q;
  int64_t q_stride_n, q_stride_k;
  DType q_dtype;
  const void* scale;
  DType scale_dtype;
  int64_t scale_stride_n, scale_stride_k;
  int64_t block_n, block_k;
  void* out;
  int64_t rows, cols;
  bool vec_in, vec_out;
};

__device__ __forceinline__ float decode_any_fp8(DType dtype, uint8_t code) {
  switch (dtype) {
    case DType::kE4M3FNUZ:
      return decode_fp8<E4M3FNUZFormat>(code);
    case DType::kE5M2:
      return decode_fp8<E5M2Format>(code);
    case DType::kE5M2FNUZ:
      return decode_fp8<E5M2FNUZFormat>(code);
    default:
      return decode_fp8<E4M3FNFormat>(code);
  }
}

// Scales widen exactly to f32 (quant_weight_ref.cpp, load_scale).
__device__ __forceinline__ float load_scale(const void* p, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::kF16:
      return f16_to_float(static_cast<const Float16*>(p)[i]);
    case DType::kBF16:
      return bf16_to_float(static_cast<const BFloat16*>(p)[i]);
    case DType::kUE8M0:
      return ue8m0_bits_to_float(static_cast<const uint8_t*>(p)[i]);
    default:
      return static_cast<const float*>(p)[i];
  }
}

template <typename Out>
__device__ __forceinline__ Out round_out(float v) {
  if constexpr (sizeof(Out) == 4) {
    return v;
  } else if constexpr (DTypeOf<Out>::value == DType::kF16) {
    return float_to_f16(v);
  } else {
    return float_to_bf16(v);
  }
}

// a / b for a, b >= 0, in 32 bits where both fit (a dequantize chunk needs two).
__device__ __forceinline__ int64_t div_nonnegative(int64_t a, int64_t b) {
  return (a | b) < (int64_t(1) << 32) ? int64_t(uint32_t(a) / uint32_t(b)) : a / b;
}

template <typename Out>
__global__ void __launch_bounds__(kThreads) dequant_kernel(const DequantParams p) {
  __shared__ float table[256];  // decode of every code, as the reference's table
  static_assert(kThreads == 256, "one table entry per thread");
  table[threadIdx.x] = decode_any_fp8(p.q_dtype, uint8_t(threadIdx.x));
  __syncthreads();
  Out* out = static_cast<Out*>(p.out);
  const int64_t per_row = ceil_div(p.cols, kChunk);
  if (global_thread() >= p.rows * per_row) return;
  for (GridCursor c(global_thread(), grid_threads(), per_row); c.row < p.rows; c.next()) {
    const int64_t c0 = c.col * kChunk;
    const int n = run_length(p.cols - c0, kChunk);
    const uint8_t* q = p.q + c.row * p.q_stride_n + c0 * p.q_stride_k;
    uint8_t code[kChunk];
    if (p.vec_in && n == kChunk) {
      const uint4 v = __ldg(reinterpret_cast<const uint4*>(q));
      const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int i = 0; i < kChunk; ++i) code[i] = uint8_t(words[i / 4] >> ((i % 4) * 8));
    } else {
#pragma unroll
      for (int i = 0; i < kChunk; ++i) code[i] = i < n ? q[i * p.q_stride_k] : uint8_t(0);
    }
    const int64_t block_row = div_nonnegative(c.row, p.block_n) * p.scale_stride_n;
    int64_t block_col = div_nonnegative(c0, p.block_k);
    int64_t in_block = c0 - block_col * p.block_k;
    float s = load_scale(p.scale, p.scale_dtype, block_row + block_col * p.scale_stride_k);
    Elems<Out, kChunk> o = {};
    if (in_block + kChunk <= p.block_k && !isnan(s)) {
      // The whole chunk under one finite-or-inf scale (every 16-column chunk of a 128-wide block):
      // no per-element block test, and only the code's NaN to carry through (mul_keeping_nan).
#pragma unroll
      for (int i = 0; i < kChunk; ++i) {
        const float a = table[code[i]];
        const float v = isnan(a) ? __uint_as_float(__float_as_uint(a) | 0x00400000u) : __fmul_rn(a, s);
        o.set(i, round_out<Out>(v));
      }
      o.store(out + c.row * p.cols + c0, n, p.vec_out);
      continue;
    }
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {
      if (i < n && in_block == p.block_k) {  // the chunk crosses into the next block
        ++block_col;
        in_block = 0;
        s = load_scale(p.scale, p.scale_dtype, block_row + block_col * p.scale_stride_k);
      }
      o.set(i, round_out<Out>(mul_keeping_nan(table[code[i]], s)));
      ++in_block;
    }
    o.store(out + c.row * p.cols + c0, n, p.vec_out);
  }
}

// ---- requantize_with_max_scale --------------------------------------------------------------

constexpr int kMaxRequantShards = 32;  // shards per launch; more take more launches

struct RequantParams {
  uint8_t* w;  // [n, k] in place, any strides (w_stride_k 1 when vec)
  int64_t w_stride_n, w_stride_k, k;
  const float* weight_scale;  // all shards: s_max and the loaded test read every one
  int64_t num_shards;
  float* max_scale;  // written by block 0 when write_max_scale
  bool write_max_scale;
  int64_t first_shard;  // this launch's shards: first_shard + [0, launch_shards)
  int launch_shards;
  int64_t row_begin[kMaxRequantShards + 1];  // their rows: [row_begin[i], row_begin[i + 1])
  float fp8_max;
  bool vec;
};

// Spec 2.2 rule 6 as the reference does it: per shard a 256-entry table, code -> code, built with
// the scalar formula q = cvt(clamp(float(f16(decode(c) * s_i)) * (1 / s_max))).
template <typename F>
__global__ void __launch_bounds__(kThreads) requant_kernel(const RequantParams p) {
  __shared__ uint8_t tables[kMaxRequantShards][256];
  __shared__ float shared_max;
  __shared__ bool loaded;
  if (threadIdx.x == 0) {
    // torch.max: a NaN anywhere gives NaN (the first one, as max_propagating_nan).
    float m = -INFINITY;
    for (int64_t i = 0; i < p.num_shards; ++i) {
      const float x = p.weight_scale[i];
      if (isnan(x)) {
        m = x;
        break;
      }
      m = fmaxf(m, x);
    }
    shared_max = m;
    // A last scale still at -FLT_MAX was never loaded: the weight stays as it is.
    loaded = p.weight_scale[p.num_shards - 1] > -448.0f;
    if (p.write_max_scale && blockIdx.x == 0) *p.max_scale = m;
  }
  __syncthreads();
  if (!loaded) return;  // the same for the whole block
  const float s_max = shared_max;
  const float inv = __fdiv_rn(1.0f, s_max);
  for (int e = threadIdx.x; e < p.launch_shards * 256; e += kThreads) {
    const int shard = e / 256, code = e % 256;
    const float s_shard = p.weight_scale[p.first_shard + shard];
    const float dq = f16_to_float(float_to_f16(__fmul_rn(decode_fp8<F>(uint8_t(code)), s_shard)));
    // A zero max scale gives zero codes (spec 2.9 H2).
    tables[shard][code] = s_max == 0.0f ? uint8_t(0) : quantize_fp8<F>(__fmul_rn(dq, inv), p.fp8_max);
  }
  __syncthreads();
  const int64_t rows = p.row_begin[p.launch_shards] - p.row_begin[0];
  const int64_t per_row = ceil_div(p.k, kChunk);
  if (global_thread() >= rows * per_row) return;
  for (GridCursor c(global_thread(), grid_threads(), per_row); c.row < rows; c.next()) {
    const int64_t row = p.row_begin[0] + c.row;
    int shard = 0;
    while (row >= p.row_begin[shard + 1]) ++shard;
    const uint8_t* table = tables[shard];
    const int64_t c0 = c.col * kChunk;
    const int n = run_length(p.k - c0, kChunk);
    uint8_t* q = p.w + row * p.w_stride_n + c0 * p.w_stride_k;
    if (p.vec && n == kChunk) {
      // Plain loads: the kernel writes this memory, so not the read-only path.
      auto map = [table](uint32_t x) {
        return uint32_t(table[x & 0xff]) | (uint32_t(table[(x >> 8) & 0xff]) << 8) |
               (uint32_t(table[(x >> 16) & 0xff]) << 16) | (uint32_t(table[x >> 24]) << 24);
      };
      const uint4 v = *reinterpret_cast<const uint4*>(q);
      *reinterpret_cast<uint4*>(q) = make_uint4(map(v.x), map(v.y), map(v.z), map(v.w));
    } else {
      for (int i = 0; i < n; ++i) q[i * p.w_stride_k] = table[q[i * p.w_stride_k]];
    }
  }
}

// ---- normalize_e4m3fn_to_e4m3fnuz -----------------------------------------------------------

struct FnuzParams {
  const uint8_t* weight;  // contiguous; may equal out
  uint8_t* out;
  int64_t numel;
  bool vec;
  const float* weight_scale;
  float* weight_scale_out;
  int64_t weight_scale_numel;
  const float* input_scale;
  float* input_scale_out;
  int64_t input_scale_numel;
};

// Spec 2.2 rule 7: byte 0x80 (-0 in e4m3fn, NaN in e4m3fnuz) becomes 0x00, the rest keep their
// bits; scales double.
__global__ void __launch_bounds__(kThreads) fnuz_kernel(const FnuzParams p) {
  const int64_t start = global_thread(), step = grid_threads();
  const int64_t chunks = ceil_div(p.numel, kChunk);
  for (int64_t i = start; i < chunks; i += step) {
    const int64_t b0 = i * kChunk;
    const int n = run_length(p.numel - b0, kChunk);
    if (p.vec && n == kChunk) {
      uint4 v = *reinterpret_cast<const uint4*>(p.weight + b0);  // may alias out: no read-only path
      v.x &= ~__vcmpeq4(v.x, 0x80808080u);
      v.y &= ~__vcmpeq4(v.y, 0x80808080u);
      v.z &= ~__vcmpeq4(v.z, 0x80808080u);
      v.w &= ~__vcmpeq4(v.w, 0x80808080u);
      *reinterpret_cast<uint4*>(p.out + b0) = v;
    } else {
      for (int j = 0; j < n; ++j) {
        const uint8_t b = p.weight[b0 + j];
        p.out[b0 + j] = b == 0x80 ? uint8_t(0) : b;
      }
    }
  }
  for (int64_t i = start; i < p.weight_scale_numel; i += step) {
    p.weight_scale_out[i] = mul_keeping_nan(p.weight_scale[i], 2.0f);
  }
  for (int64_t i = start; i < p.input_scale_numel; i += step) {
    p.input_scale_out[i] = mul_keeping_nan(p.input_scale[i], 2.0f);
  }
}

}  // namespace fp8kit::ops::kernels
