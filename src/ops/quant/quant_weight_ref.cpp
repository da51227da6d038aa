// CPU reference of the weight-side ops: quantize_weight (per-tensor, per-channel, block),
// dequantize, requantize_with_max_scale (spec 1.11 and 2.2 rule 6, fp16 step included) and
// normalize_e4m3fn_to_e4m3fnuz (rule 7). Tested by tests/cpu/test_quant_weight.cpp against
// independent scalar re-implementations.
#include <cfloat>
#include <cmath>
#include <mutex>

#include "core/checked_math.h"
#include "core/parallel.h"
#include "ops/quant/quant_ref.h"
#include "ops/quant/quant_ref_loops.h"

namespace fp8kit::ops {
namespace {

using ref::absmax_bits;
using ref::absmax_to_float;
using ref::contiguous_run;
using ref::row_grain;

// s = fmaxf(amax / FP8_MAX, FLT_MIN): an all-zero block still gets a positive finite scale.
float weight_scale_from_amax(float amax, const WeightQuantArgs& a) {
  float s = std::fmaxf(amax / a.fp8_max, FLT_MIN);
  if (a.ue8m0_scales) s = ue8m0_bits_to_float(float_to_ue8m0_bits(s, E8M0Rounding::kUpward));
  return s;
}

template <typename T, typename F>
void quantize_weight_per_tensor(const WeightQuantArgs& a) {
  const T* w = static_cast<const T*>(a.w);
  uint8_t* out = static_cast<uint8_t*>(a.out);
  std::mutex mutex;
  uint32_t amax_bits = 0;
  parallel_for(a.n, row_grain(a.k), [&](int64_t begin, int64_t end) {
    std::vector<T> buffer;
    uint32_t local = 0;
    for (int64_t r = begin; r < end; ++r) {
      local = std::max(local, absmax_bits(contiguous_run(w + r * a.w_stride_n, a.k, a.w_stride_k, buffer), a.k));
    }
    std::lock_guard<std::mutex> lock(mutex);
    amax_bits = std::max(amax_bits, local);
  });
  const float s = weight_scale_from_amax(absmax_to_float<T>(amax_bits), a);
  a.scale[0] = s;
  const float inv = 1.0f / s;  // multiply by the reciprocal, as the static kernel (spec 2.2 rule 1)
  parallel_for(a.n, row_grain(a.k), [&](int64_t begin, int64_t end) {
    std::vector<T> buffer;
    for (int64_t r = begin; r < end; ++r) {
      const T* x = contiguous_run(w + r * a.w_stride_n, a.k, a.w_stride_k, buffer);
      ref::quantize_mul<T, F>(x, a.k, inv, a.fp8_max, out + r * a.k);
    }
  });
}

// Per-channel is the block scheme with blocks of one full row; both divide by the scale. A work
// item is one band of block_n rows times a run of blocks that spans a few thousand columns, read
// row by row: long contiguous reads, and the second (quantizing) pass finds the band in cache.
template <typename T, typename F>
void quantize_weight_blocks(const WeightQuantArgs& a, int64_t block_n, int64_t block_k, int64_t blocks_k) {
  const T* w = static_cast<const T*>(a.w);
  uint8_t* out = static_cast<uint8_t*>(a.out);
  const int64_t blocks_n = ceil_div(a.n, block_n);
  if (blocks_n == 0 || blocks_k == 0) return;  // no block, no scale
  const int64_t run = std::max<int64_t>(1, 4096 / block_k);  // blocks per work item
  const int64_t runs_k = ceil_div(blocks_k, run);
  parallel_for(blocks_n * runs_k, row_grain(block_n * block_k * run), [&](int64_t begin, int64_t end) {
    std::vector<T> buffer;
    std::vector<uint32_t> amax_bits(static_cast<size_t>(run));
    std::vector<float> scales(static_cast<size_t>(run));
    for (int64_t item = begin; item < end; ++item) {
      const int64_t bi = item / runs_k, bj0 = (item % runs_k) * run, bj1 = std::min(blocks_k, bj0 + run);
      const int64_t r0 = bi * block_n, r1 = std::min(a.n, r0 + block_n);
      // The columns of block bj are [bj * block_k, min(k, (bj + 1) * block_k)): partial edge
      // blocks take the amax of their valid elements only.
      auto for_each_segment = [&](int64_t r, auto&& fn) {
        const T* row = w + r * a.w_stride_n;
        for (int64_t bj = bj0; bj < bj1; ++bj) {
          const int64_t c0 = bj * block_k, cols = std::min(a.k, c0 + block_k) - c0;
          fn(bj - bj0, contiguous_run(row + c0 * a.w_stride_k, cols, a.w_stride_k, buffer), c0, cols);
        }
      };
      std::fill(amax_bits.begin(), amax_bits.end(), 0u);
      for (int64_t r = r0; r < r1; ++r) {
        for_each_segment(r, [&](int64_t j, const T* x, int64_t, int64_t cols) {
          amax_bits[size_t(j)] = std::max(amax_bits[size_t(j)], absmax_bits(x, cols));
        });
      }
      for (int64_t bj = bj0; bj < bj1; ++bj) {
        scales[size_t(bj - bj0)] = weight_scale_from_amax(absmax_to_float<T>(amax_bits[size_t(bj - bj0)]), a);
        a.scale[bi * blocks_k + bj] = scales[size_t(bj - bj0)];
      }
      for (int64_t r = r0; r < r1; ++r) {
        for_each_segment(r, [&](int64_t j, const T* x, int64_t c0, int64_t cols) {
          ref::quantize_div<T, F>(x, cols, scales[size_t(j)], a.fp8_max, out + r * a.k + c0);
        });
      }
    }
  });
}

template <typename F>
void decode_table(float* table) {
  for (int c = 0; c < 256; ++c) table[c] = decode_fp8<F>(uint8_t(c));
}

void fp8_decode_table(DType dtype, float* table) {
  switch (dtype) {
    case DType::kE4M3FN:
      return decode_table<E4M3FNFormat>(table);
    case DType::kE4M3FNUZ:
      return decode_table<E4M3FNUZFormat>(table);
    case DType::kE5M2:
      return decode_table<E5M2Format>(table);
    case DType::kE5M2FNUZ:
      return decode_table<E5M2FNUZFormat>(table);
    default:
      fail(ErrorCode::kInternal, "quant_ref: {} is not an FP8 dtype", dtype_name(dtype));
  }
}

float load_scale(const void* p, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::kF32:
      return static_cast<const float*>(p)[i];
    case DType::kF16:
      return f16_to_float(static_cast<const Float16*>(p)[i]);
    case DType::kBF16:
      return bf16_to_float(static_cast<const BFloat16*>(p)[i]);
    case DType::kUE8M0:
      return ue8m0_bits_to_float(static_cast<const uint8_t*>(p)[i]);
    default:
      fail(ErrorCode::kInternal, "quant_ref: unexpected scale dtype {}", dtype_name(dtype));
  }
}

inline void store_value(float v, float* out) { *out = v; }
inline void store_value(float v, Float16* out) { *out = float_to_f16(v); }
inline void store_value(float v, BFloat16* out) { *out = float_to_bf16(v); }

template <typename Out>
void dequantize_typed(const DequantArgs& a) {
  float table[256];
  fp8_decode_table(a.q_dtype, table);
  Out* out = static_cast<Out*>(a.out);
  parallel_for(a.n, row_grain(a.k), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const uint8_t* q = a.q + i * a.q_stride_n;
      Out* o = out + i * a.k;
      for (int64_t c0 = 0; c0 < a.k; c0 += a.block_k) {
        const float s = load_scale(a.scale, a.scale_dtype,
                                   (i / a.block_n) * a.scale_stride_n + (c0 / a.block_k) * a.scale_stride_k);
        const int64_t c1 = std::min(a.k, c0 + a.block_k);
        for (int64_t j = c0; j < c1; ++j) store_value(table[q[j * a.q_stride_k]] * s, o + j);
      }
    }
  });
}

// torch.max: a NaN anywhere makes the maximum NaN.
float max_propagating_nan(const float* x, int64_t n) {
  float m = -INFINITY;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) return x[i];
    m = std::fmaxf(m, x[i]);
  }
  return m;
}

// The requantization of spec 2.2 rule 6 depends only on the code, so each shard applies a
// 256-entry table built with the scalar formula.
template <typename F>
void requantize_table(float s_shard, float s_max, float fp8_max, uint8_t* table) {
  const float inv = 1.0f / s_max;
  for (int c = 0; c < 256; ++c) {
    const float dq = f16_to_float(float_to_f16(decode_fp8<F>(uint8_t(c)) * s_shard));  // per_tensor_dequantize
    // A zero max scale gives zero codes (spec 2.9 H2, as the static path of scaled_fp8_quant).
    table[c] = s_max == 0.0f ? uint8_t(0) : quantize_fp8<F>(dq * inv, fp8_max);
  }
}

}  // namespace

void quantize_weight_ref(const WeightQuantArgs& args) {
  ref::dispatch_input_and_format(args.in_dtype, args.out_dtype, [&](auto t, auto f) {
    using T = decltype(t);
    using F = decltype(f);
    switch (args.scheme) {
      case WeightQuantScheme::kPerTensor:
        return quantize_weight_per_tensor<T, F>(args);
      case WeightQuantScheme::kPerChannel:  // one block per row, even an empty one
        return quantize_weight_blocks<T, F>(args, 1, std::max<int64_t>(args.k, 1), 1);
      case WeightQuantScheme::kBlock:
        return quantize_weight_blocks<T, F>(args, args.block_n, args.block_k,
                                            ceil_div(args.k, args.block_k));
    }
  });
}

void dequantize_ref(const DequantArgs& args) {
  switch (args.out_dtype) {
    case DType::kF32:
      return dequantize_typed<float>(args);
    case DType::kF16:
      return dequantize_typed<Float16>(args);
    case DType::kBF16:
      return dequantize_typed<BFloat16>(args);
    default:
      fail(ErrorCode::kInternal, "dequantize_ref: unexpected output dtype {}", dtype_name(args.out_dtype));
  }
}

void requantize_with_max_scale_ref(const RequantizeArgs& args) {
  const float s_max = max_propagating_nan(args.weight_scale, args.num_shards);
  *args.max_scale = s_max;
  // A last shard scale still at -FLT_MAX (<= finfo(e4m3fn).min = -448) was never loaded: the
  // checkpoint stores the fused weight with one scale, and the weight is left as it is.
  if (!(args.weight_scale[args.num_shards - 1] > -448.0f)) return;
  int64_t start = 0;
  for (int64_t shard = 0; shard < args.num_shards; ++shard) {
    uint8_t table[256];
    if (args.weight_dtype == DType::kE4M3FNUZ) {
      requantize_table<E4M3FNUZFormat>(args.weight_scale[shard], s_max, args.fp8_max, table);
    } else {
      requantize_table<E4M3FNFormat>(args.weight_scale[shard], s_max, args.fp8_max, table);
    }
    const int64_t rows = args.logical_widths[shard];
    parallel_for(rows, row_grain(args.k), [&](int64_t begin, int64_t end) {
      for (int64_t r = start + begin; r < start + end; ++r) {
        uint8_t* w = args.weight + r * args.w_stride_n;
        for (int64_t j = 0; j < args.k; ++j) w[j * args.w_stride_k] = table[w[j * args.w_stride_k]];
      }
    });
    start += rows;
  }
}

void normalize_e4m3fn_to_e4m3fnuz_ref(const FnuzNormalizeArgs& args) {
  // 0x80 is -0 in e4m3fn but NaN in e4m3fnuz; every other byte keeps its bits (and halves its value).
  for (int64_t i = 0; i < args.numel; ++i) args.out[i] = args.weight[i] == 0x80 ? uint8_t(0) : args.weight[i];
  for (int64_t i = 0; i < args.weight_scale_numel; ++i) args.weight_scale_out[i] = args.weight_scale[i] * 2.0f;
  for (int64_t i = 0; i < args.input_scale_numel; ++i) args.input_scale_out[i] = args.input_scale[i] * 2.0f;
}

}  // namespace fp8kit::ops
