// Host-side helpers of the quantization launchers (quant_cuda.cu, quant_weight_cuda.cu): grid
// sizes from the device's SM count and each kernel's occupancy (both cached), alignment tests for
// the 16-byte paths, the dispatch from runtime dtypes to kernel template arguments, and the
// launches both files use (defined in quant_cuda.cu).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>

#include "core/cuda/cuda_check.h"
#include "fp8kit/dtype.h"
#include "fp8kit/error.h"
#include "fp8kit/stream.h"
#include "ops/quant/quant_kernels.cuh"

namespace fp8kit::ops::launch {

inline cudaStream_t to_cuda(Stream stream) { return static_cast<cudaStream_t>(stream.handle); }

// Streaming multiprocessors of the current device (the launchers run under route()'s DeviceGuard).
inline int sm_count() {
  constexpr int kMaxDevices = 64;
  static std::array<std::atomic<int>, kMaxDevices> cache{};
  int device = 0;
  FP8KIT_CUDA_CHECK(cudaGetDevice(&device));
  if (device < 0 || device >= kMaxDevices) device = 0;
  int count = cache[size_t(device)].load(std::memory_order_relaxed);
  if (count == 0) {
    FP8KIT_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
    cache[size_t(device)].store(count, std::memory_order_relaxed);
  }
  return count;
}

// Blocks of kernels::kThreads threads of `kKernel` resident on one SM (asked once per kernel; the
// answer only sizes grids, so a mix of GPU models costs at most some speed).
template <auto kKernel>
int blocks_per_sm() {
  static const int blocks = [] {
    int n = 0;
    FP8KIT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kKernel, kernels::kThreads, 0));
    return std::max(n, 1);
  }();
  return blocks;
}

// A grid-stride kernel's grid: enough blocks for `items` (one per thread), at most one full wave.
template <auto kKernel>
unsigned grid_for(int64_t items) {
  const int64_t wave = int64_t(blocks_per_sm<kKernel>()) * sm_count();
  return unsigned(std::clamp<int64_t>(kernels::ceil_div(items, kernels::kThreads), 1, wave));
}

// Same, for kernels whose work comes in `units` handed to whole blocks (rows, tiles).
template <auto kKernel>
unsigned grid_for_units(int64_t units) {
  const int64_t wave = int64_t(blocks_per_sm<kKernel>()) * sm_count();
  return unsigned(std::clamp<int64_t>(units, 1, wave));
}

inline bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// Whether every row of a [rows, ...] view starts `bytes`-aligned.
inline bool rows_aligned(const void* base, int64_t row_stride, size_t element_size, int64_t rows, size_t bytes) {
  return aligned(base, bytes) && (rows <= 1 || (uint64_t(row_stride) * element_size) % bytes == 0);
}

[[noreturn]] inline void unexpected_dtype(const char* what, DType dtype) {
  throw Error(ErrorCode::kInternal, std::string("quant_cuda: unexpected ") + what + " " + dtype_name(dtype));
}

// fn(T{}) for the C++ type of an f32/f16/bf16 dtype.
template <typename Fn>
void dispatch_float(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kF32:
      return fn(float{});
    case DType::kF16:
      return fn(Float16{});
    case DType::kBF16:
      return fn(BFloat16{});
    default:
      unexpected_dtype("float dtype", dtype);
  }
}

// fn(F{}) for the format of an e4m3fn/e4m3fnuz dtype.
template <typename Fn>
void dispatch_e4m3(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kE4M3FN:
      return fn(E4M3FNFormat{});
    case DType::kE4M3FNUZ:
      return fn(E4M3FNUZFormat{});
    default:
      unexpected_dtype("FP8 dtype", dtype);
  }
}

template <typename Fn>
void dispatch_input_and_format(DType in, DType out, Fn&& fn) {
  dispatch_float(in, [&](auto t) { dispatch_e4m3(out, [&](auto f) { fn(t, f); }); });
}

// A [m, k] view (rows row_stride apart, elements col_stride apart) as a region to walk: one row
// of m * k elements when it is contiguous (no per-row alignment needed), otherwise m rows.
struct Region {
  int64_t rows, cols, row_stride, col_stride;
  bool vec;  // whole 16-element chunks start 16-byte aligned
};
Region input_region(const void* p, size_t element_size, int64_t m, int64_t k, int64_t row_stride, int64_t col_stride);

// atomicMax of fl(max|x| / fp8_max) over the region into *result (zeroed by the caller).
void launch_absmax(DType in_dtype, const Region& in, const void* p, float fp8_max, float* result, cudaStream_t stream);
// Quantizes input [m, k] (rows in_row_stride apart, elements p.in_col_stride apart) into out
// [out_rows, k] (rows out_row_stride apart) with the scale p.scale points to; output rows past m
// are zero codes. Fills the region fields of p. With `absmax_first` (a small input: at most
// kSmallDynamicElements), one block first computes the scale into absmax_first->result itself
// (launch_absmax's value, nothing zeroed before) and then quantizes with it.
// With `grid_counter` as well (a mid-sized input: at most grid_dynamic_elements()), one launch of
// one block a multiprocessor at most does the same across a grid barrier on the counter; the
// caller zeroes *absmax_first->result and the counter before.
void launch_per_tensor_quant(DType in_dtype, DType out_dtype, kernels::PerTensorQuantParams p, int64_t m, int64_t k,
                             int64_t in_row_stride, int64_t out_rows, int64_t out_row_stride, cudaStream_t stream,
                             const kernels::AbsmaxParams* absmax_first = nullptr, uint32_t* grid_counter = nullptr);
// Dynamic per-tensor quantization in one block up to this many input elements (two 16-element
// chunks a thread): one launch instead of a memset and two (decode-sized activations).
constexpr int64_t kSmallDynamicElements = 2 * kernels::kThreads * kernels::kChunk;
// ... and in one launch over a grid barrier up to one 16-element chunk a thread of one block a
// multiprocessor (540,672 elements on 132): a memset and one launch instead of a memset and two.
int64_t grid_dynamic_elements();
// One scale per row (dynamic per-token, per-channel weights).
void launch_row_quant(DType in_dtype, DType out_dtype, const kernels::RowQuantParams& p, cudaStream_t stream);

}  // namespace fp8kit::ops::launch
