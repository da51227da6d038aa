// Argument blocks of the FP8 quantization ops: raw pointers, element counts, strides in elements,
// dtypes and constants, already validated by src/ops/quant/quant.cpp. The CPU reference
// (quant_ref.h) and the CUDA launchers take the very same structs, so one value drives both in
// the bit-exactness tests. Pointers live on the op's device unless a field says "host".
#pragma once

#include <cstdint>

#include "fp8kit/dtype.h"

namespace fp8kit::ops {

// scaled_fp8_quant (spec 1.6, 2.2 rules 1-3).
enum class ScaledQuantMode : uint8_t {
  kStatic,            // q = cvt(clamp(x * (1 / scale[0])))
  kDynamicPerTensor,  // scale[0] = max|x| / fp8_max, then as kStatic
  kDynamicPerToken,   // scale[m] = fmaxf(fminf(max_k |x[m,k]|, *scale_ub) / fp8_max, min_scaling_factor)
};

struct ScaledFp8QuantArgs {
  const void* input = nullptr;   // [m, k] of in_dtype, last dimension contiguous
  DType in_dtype = DType::kF32;  // f32 | f16 | bf16
  int64_t m = 0, k = 0;
  int64_t input_row_stride = 0;
  void* out = nullptr;               // [out_rows, k] of out_dtype, last dimension contiguous
  DType out_dtype = DType::kE4M3FN;  // e4m3fn | e4m3fnuz
  int64_t out_rows = 0;              // >= m; rows [m, out_rows) are written as zero codes
  int64_t out_row_stride = 0;
  // kStatic: read, one element. kDynamicPerTensor: written, one element. kDynamicPerToken:
  // written, out_rows elements with stride 1 (rows past m get 1.0f).
  float* scale = nullptr;
  // kDynamicPerTensor: null, or the 4 bytes right after *scale, for the one-launch form of a
  // mid-sized input (a grid barrier's counter; zeroed here with the scale).
  uint32_t* grid_counter = nullptr;
  const float* scale_ub = nullptr;  // kDynamicPerToken only; null: no bound
  ScaledQuantMode mode = ScaledQuantMode::kDynamicPerTensor;
  float fp8_max = 448.0f;
  float min_scaling_factor = 1.0f / (448.0f * 512.0f);
};

// per_token_group_quant (spec 1.6, 2.2 rule 4).
struct PerTokenGroupQuantArgs {
  const void* input = nullptr;  // [rows, k] of in_dtype, last dimension contiguous
  DType in_dtype = DType::kF32;
  int64_t rows = 0, k = 0;
  int64_t input_row_stride = 0;
  void* out = nullptr;  // [rows, k] of out_dtype, last dimension contiguous
  DType out_dtype = DType::kE4M3FN;
  int64_t out_row_stride = 0;
  // [rows, k / group_size] f32: element (r, g) at scale[r * scale_row_stride + g * scale_group_stride]
  // (row-major: (k / group_size, 1); column-major: (1, rows)).
  float* scale = nullptr;
  int64_t scale_row_stride = 0, scale_group_stride = 0;
  int64_t group_size = 128;  // divides k
  float eps = 1e-10f;
  float fp8_max = 448.0f;
  bool use_ue8m0 = false;
};

// quantize_weight_per_tensor / _per_channel / _block: one amax per block of block_n x block_k
// elements (per-tensor: the whole tensor, per-channel: one row).
enum class WeightQuantScheme : uint8_t {
  kPerTensor,   // q = cvt(clamp(w * (1 / s)))
  kPerChannel,  // q = cvt(clamp(w / s[n]))
  kBlock,       // q = cvt(clamp(w / s[n / block_n, k / block_k]))
};

struct WeightQuantArgs {
  const void* w = nullptr;  // [n, k] of in_dtype, any strides
  DType in_dtype = DType::kBF16;
  int64_t n = 0, k = 0;
  int64_t w_stride_n = 0, w_stride_k = 1;
  void* out = nullptr;  // [n, k] of out_dtype, contiguous
  DType out_dtype = DType::kE4M3FN;
  // f32, contiguous: [1] (per-tensor), [n] (per-channel), [ceil(n/block_n), ceil(k/block_k)] (block)
  float* scale = nullptr;
  WeightQuantScheme scheme = WeightQuantScheme::kBlock;
  int64_t block_n = 128, block_k = 128;  // kBlock only
  float fp8_max = 448.0f;
  bool ue8m0_scales = false;
};

// dequantize_weight and per_tensor_dequantize: w[i, j] = round_out(decode(q[i, j]) * s[i / block_n,
// j / block_k]). A per-tensor scale is one block covering everything (scale strides may be 0).
struct DequantArgs {
  const uint8_t* q = nullptr;  // [n, k] of q_dtype (any FP8 format), any strides
  DType q_dtype = DType::kE4M3FN;
  int64_t n = 0, k = 0;
  int64_t q_stride_n = 0, q_stride_k = 1;
  const void* scale = nullptr;  // f32 | f16 | bf16 | ue8m0, widened exactly to f32
  DType scale_dtype = DType::kF32;
  int64_t scale_stride_n = 0, scale_stride_k = 0;
  int64_t block_n = 1, block_k = 1;  // >= 1
  void* out = nullptr;               // [n, k] of out_dtype, contiguous
  DType out_dtype = DType::kF32;     // f32 | f16 | bf16
};

// requantize_with_max_scale (spec 1.11, 2.2 rule 6), in place.
struct RequantizeArgs {
  uint8_t* weight = nullptr;            // [n, k] of weight_dtype, any strides; rewritten in place
  DType weight_dtype = DType::kE4M3FN;  // e4m3fn | e4m3fnuz
  int64_t n = 0, k = 0;
  int64_t w_stride_n = 0, w_stride_k = 1;
  const float* weight_scale = nullptr;      // [num_shards], contiguous
  const int64_t* logical_widths = nullptr;  // host, [num_shards], summing to n
  int64_t num_shards = 0;
  float* max_scale = nullptr;  // written: max(weight_scale), one element
  float fp8_max = 448.0f;
};

// normalize_e4m3fn_to_e4m3fnuz (spec 1.11, 2.2 rule 7): byte map plus doubled scales.
struct FnuzNormalizeArgs {
  const uint8_t* weight = nullptr;  // e4m3fn bytes, contiguous
  uint8_t* out = nullptr;           // e4m3fnuz bytes, contiguous (may equal weight)
  int64_t numel = 0;
  const float* weight_scale = nullptr;  // contiguous f32
  float* weight_scale_out = nullptr;
  int64_t weight_scale_numel = 0;
  const float* input_scale = nullptr;  // null when absent
  float* input_scale_out = nullptr;
  int64_t input_scale_numel = 0;
};

}  // namespace fp8kit::ops
