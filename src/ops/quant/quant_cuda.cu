// Launchers of scaled_fp8_quant and per_token_group_quant (kernels: quant_kernels.cuh; reference:
// quant_ref.cpp), and the per-tensor and per-row launches the weight launchers share. Each picks
// the kernel for the shape and alignment, sizes the grid to at most one wave of the GPU and
// checks the launch; nothing here waits for the device.
// Tests: tests/gpu/test_quant_*_cuda.cpp; benchmark: bench/bench_quant.
#include "ops/quant/quant_cuda.h"
#include "ops/quant/quant_launch.cuh"

namespace fp8kit::ops {

using namespace kernels;

namespace launch {

Region input_region(const void* p, size_t element_size, int64_t m, int64_t k, int64_t row_stride, int64_t col_stride) {
  if (col_stride == 1 && (m <= 1 || row_stride == k)) return {m == 0 ? 0 : 1, m * k, 0, 1, aligned(p, 16)};
  return {m, k, row_stride, col_stride, col_stride == 1 && rows_aligned(p, row_stride, element_size, m, 16)};
}

void launch_absmax(DType in_dtype, const Region& in, const void* p, float fp8_max, float* result, cudaStream_t stream) {
  if (in.rows * in.cols == 0) return;
  const AbsmaxParams params{p, in.row_stride, in.col_stride, in.rows, in.cols, in.vec, fp8_max, result};
  dispatch_float(in_dtype, [&](auto t) {
    constexpr auto kernel = absmax_kernel<decltype(t)>;
    cuda::launch_pdl(kernel, grid_for<kernel>(in.rows * ceil_div(in.cols, kChunk)), kThreads, 0, stream, params);
    FP8KIT_CHECK_LAUNCH(stream, "absmax_kernel");
  });
}

int64_t grid_dynamic_elements() { return int64_t(sm_count()) * kThreads * kChunk; }

void launch_per_tensor_quant(DType in_dtype, DType out_dtype, PerTensorQuantParams p, int64_t m, int64_t k,
                             int64_t in_row_stride, int64_t out_rows, int64_t out_row_stride, cudaStream_t stream,
                             const AbsmaxParams* absmax_first, uint32_t* grid_counter) {
  dispatch_input_and_format(in_dtype, out_dtype, [&](auto t, auto f) {
    using T = decltype(t);
    using F = decltype(f);
    const bool flat_in = p.in_col_stride == 1 && (m <= 1 || in_row_stride == k);
    const bool flat_out = out_rows <= 1 || out_row_stride == k;
    if (flat_in && flat_out) {
      // Both sides contiguous: one row of out_rows * k codes, of which the first m * k quantize.
      p.in_row_stride = 0;
      p.out_row_stride = 0;
      p.rows = out_rows == 0 ? 0 : 1;
      p.cols = out_rows * k;
      p.in_rows = p.rows;
      p.in_cols = m * k;
      p.vec_in = aligned(p.in, 16);
      p.vec_out = aligned(p.out, 16);
    } else {
      p.in_row_stride = in_row_stride;
      p.out_row_stride = out_row_stride;
      p.rows = out_rows;
      p.cols = k;
      p.in_rows = m;
      p.in_cols = k;
      p.vec_in = p.in_col_stride == 1 && rows_aligned(p.in, in_row_stride, sizeof(T), m, 16);
      p.vec_out = rows_aligned(p.out, out_row_stride, 1, out_rows, 16);
    }
    if (absmax_first != nullptr && grid_counter != nullptr) {
      const int64_t chunks = std::max(absmax_first->rows * ceil_div(absmax_first->cols, kChunk), p.rows * ceil_div(p.cols, kChunk));
      const int64_t blocks = std::clamp<int64_t>(ceil_div(chunks, kThreads), 1, sm_count());
      cuda::launch_cooperative(grid_dynamic_per_tensor_quant_kernel<T, F>, unsigned(blocks), kThreads, 0, stream,
                               *absmax_first, p, grid_counter);
      FP8KIT_CHECK_LAUNCH(stream, "grid_dynamic_per_tensor_quant_kernel");
      return;
    }
    if (absmax_first != nullptr) {
      cuda::launch_pdl(small_dynamic_per_tensor_quant_kernel<T, F>, 1, kThreads, 0, stream, *absmax_first, p);
      FP8KIT_CHECK_LAUNCH(stream, "small_dynamic_per_tensor_quant_kernel");
      return;
    }
    if (p.rows * p.cols == 0) return;
    constexpr auto kernel = per_tensor_quant_kernel<T, F>;
    cuda::launch_pdl(kernel, grid_for<kernel>(p.rows * ceil_div(p.cols, kChunk)), kThreads, 0, stream, p);
    FP8KIT_CHECK_LAUNCH(stream, "per_tensor_quant_kernel");
  });
}

namespace {

template <auto kKernel>
void launch_rows(const RowQuantParams& p, int64_t rows_per_block, cudaStream_t stream) {
  kKernel<<<grid_for_units<kKernel>(ceil_div(p.out_rows, rows_per_block)), kThreads, 0, stream>>>(p);
  FP8KIT_CHECK_LAUNCH(stream, "row_quant_kernel");
}

// The row in registers: a warp per row up to 2048 columns (4096 for 16-bit inputs), the block
// per row up to 16384 (32768 for 16-bit inputs); longer rows are read twice. Rows of at most 32
// registers per thread (two slots of f32, four of f16/bf16) prefetch the team's next row. Fewer
// rows than the GPU holds warps (decode steps) take the block per row whatever their length: a
// warp alone on a 4096-wide bf16 row took 14.4 us on the H200, the block 5.5 us on 14336.
template <typename T, typename F>
void launch_row_quant_typed(const RowQuantParams& p, cudaStream_t stream) {
  constexpr int64_t kWarpRow = 32 * kChunk, kBlockRow = kThreads * kChunk;
  constexpr bool k16 = sizeof(T) == 2;
  const int64_t k = p.cols;
  const bool few_rows = p.out_rows < int64_t(sm_count()) * kWarps;
  if (!few_rows) {
    if (k <= kWarpRow) return launch_rows<row_quant_kernel<T, F, 32, 1, true>>(p, kWarps, stream);
    if (k <= 2 * kWarpRow) return launch_rows<row_quant_kernel<T, F, 32, 2, true>>(p, kWarps, stream);
    if (k <= 4 * kWarpRow) return launch_rows<row_quant_kernel<T, F, 32, 4, k16>>(p, kWarps, stream);
    if constexpr (k16) {
      if (k <= 8 * kWarpRow) return launch_rows<row_quant_kernel<T, F, 32, 8, false>>(p, kWarps, stream);
    }
  }
  if (k <= kBlockRow) return launch_rows<row_quant_kernel<T, F, kThreads, 1, true>>(p, 1, stream);
  if (k <= 2 * kBlockRow) return launch_rows<row_quant_kernel<T, F, kThreads, 2, true>>(p, 1, stream);
  if (k <= 4 * kBlockRow) return launch_rows<row_quant_kernel<T, F, kThreads, 4, k16>>(p, 1, stream);
  if constexpr (k16) {
    // 5 slots: 18432 columns (4.5 slots) without the registers of 8 (3 blocks per SM, not 2).
    if (k <= 5 * kBlockRow) return launch_rows<row_quant_kernel<T, F, kThreads, 5, false>>(p, 1, stream);
    if (k <= 8 * kBlockRow) return launch_rows<row_quant_kernel<T, F, kThreads, 8, false>>(p, 1, stream);
  }
  launch_rows<row_quant_looped_kernel<T, F>>(p, 1, stream);
}

}  // namespace

void launch_row_quant(DType in_dtype, DType out_dtype, const RowQuantParams& p, cudaStream_t stream) {
  if (p.out_rows == 0) return;
  dispatch_input_and_format(in_dtype, out_dtype,
                            [&](auto t, auto f) { launch_row_quant_typed<decltype(t), decltype(f)>(p, stream); });
}

}  // namespace launch

using namespace launch;

namespace {

template <auto kKernel>
void launch_groups(const GroupQuantParams& p, int64_t threads, cudaStream_t stream) {
  cuda::launch_pdl(kKernel, grid_for<kKernel>(threads), kThreads, 0, stream, p);
  FP8KIT_CHECK_LAUNCH(stream, "group_quant_kernel");
}

// 16-byte aligned rows, g = 32..256 and sizes that fit the vector kernel's 32-bit counters:
// group_quant_kernel, g / (64 bytes of input) lanes per group; otherwise a warp per group, element
// by element.
template <typename T, typename F>
void launch_group_quant(const PerTokenGroupQuantArgs& a, cudaStream_t stream) {
  const int64_t groups_per_row = a.k / a.group_size, groups = a.rows * groups_per_row;
  if (groups == 0) return;
  const GroupQuantParams p{a.input,
                           a.input_row_stride,
                           static_cast<uint8_t*>(a.out),
                           a.out_row_stride,
                           a.scale,
                           a.scale_row_stride,
                           a.scale_group_stride,
                           a.rows,
                           groups_per_row,
                           a.group_size,
                           a.eps,
                           a.fp8_max,
                           a.use_ue8m0};
  constexpr int64_t kElems = 64 / int64_t(sizeof(T));  // as group_quant_kernel
  const bool vector_rows = rows_aligned(a.input, a.input_row_stride, sizeof(T), a.rows, 16) &&
                           rows_aligned(a.out, a.out_row_stride, 1, a.rows, 16);
  // The kernel's group cursor may run one grid of groups (at most 8 blocks per SM, a group per
  // lane) past the end; strides and in-row offsets are uint32.
  constexpr int64_t kU32 = int64_t(1) << 32;
  const int64_t grid_groups = int64_t(8) * kThreads * sm_count();
  const bool fits_u32 = groups + grid_groups < kU32 && a.k < kU32 && a.input_row_stride < kU32 &&
                        a.out_row_stride < kU32 && a.scale_row_stride < kU32 && a.scale_group_stride < kU32;
  if (vector_rows && fits_u32) {
    switch (a.group_size) {
      case 32:
        return launch_groups<group_quant_kernel<T, F, 32>>(p, ceil_div(groups * 32, kElems), stream);
      case 64:
        return launch_groups<group_quant_kernel<T, F, 64>>(p, ceil_div(groups * 64, kElems), stream);
      case 128:
        return launch_groups<group_quant_kernel<T, F, 128>>(p, ceil_div(groups * 128, kElems), stream);
      case 256:
        return launch_groups<group_quant_kernel<T, F, 256>>(p, ceil_div(groups * 256, kElems), stream);
      default:
        break;
    }
  }
  launch_groups<group_quant_generic_kernel<T, F>>(p, groups * 32, stream);
}

}  // namespace

void scaled_fp8_quant_cuda(const ScaledFp8QuantArgs& a, Stream stream) {
  const cudaStream_t s = to_cuda(stream);
  PerTensorQuantParams p{};
  p.in = a.input;
  p.in_col_stride = 1;
  p.out = static_cast<uint8_t*>(a.out);
  p.scale = a.scale;
  p.fp8_max = a.fp8_max;
  switch (a.mode) {
    case ScaledQuantMode::kStatic:
      launch_per_tensor_quant(a.in_dtype, a.out_dtype, p, a.m, a.k, a.input_row_stride, a.out_rows, a.out_row_stride,
                              s);
      break;
    case ScaledQuantMode::kDynamicPerTensor: {
      // The scale is reduced on the device and read there by the second kernel: no host round
      // trip, so the three steps capture into a CUDA graph. Small inputs: one block does both.
      const size_t element_size = dtype_size(a.in_dtype);
      const Region in = input_region(a.input, element_size, a.m, a.k, a.input_row_stride, 1);
      const AbsmaxParams first{a.input, in.row_stride, in.col_stride, in.rows, in.cols, in.vec, a.fp8_max, a.scale};
      if (a.m * a.k <= kSmallDynamicElements) {
        launch_per_tensor_quant(a.in_dtype, a.out_dtype, p, a.m, a.k, a.input_row_stride, a.out_rows, a.out_row_stride,
                                s, &first);
        break;
      }
      if (a.grid_counter != nullptr && a.m * a.k <= grid_dynamic_elements()) {
        // The scale and the counter after it, zeroed by one memset.
        if (reinterpret_cast<const char*>(a.grid_counter) != reinterpret_cast<const char*>(a.scale + 1)) {
          throw Error(ErrorCode::kInternal, "scaled_fp8_quant: the grid counter must follow the scale");
        }
        FP8KIT_CUDA_CHECK(cudaMemsetAsync(a.scale, 0, 2 * sizeof(float), s));
        launch_per_tensor_quant(a.in_dtype, a.out_dtype, p, a.m, a.k, a.input_row_stride, a.out_rows, a.out_row_stride,
                                s, &first, a.grid_counter);
        break;
      }
      FP8KIT_CUDA_CHECK(cudaMemsetAsync(a.scale, 0, sizeof(float), s));
      launch_absmax(a.in_dtype, in, a.input, a.fp8_max, a.scale, s);
      p.reverse = true;
      launch_per_tensor_quant(a.in_dtype, a.out_dtype, p, a.m, a.k, a.input_row_stride, a.out_rows, a.out_row_stride,
                              s);
      break;
    }
    case ScaledQuantMode::kDynamicPerToken: {
      const size_t element_size = dtype_size(a.in_dtype);
      RowQuantParams r{};
      r.in = a.input;
      r.in_row_stride = a.input_row_stride;
      r.in_col_stride = 1;
      r.out = static_cast<uint8_t*>(a.out);
      r.out_row_stride = a.out_row_stride;
      r.scale = a.scale;
      r.rows = a.m;
      r.out_rows = a.out_rows;
      r.cols = a.k;
      r.scale_ub = a.scale_ub;
      r.fp8_max = a.fp8_max;
      r.floor = a.min_scaling_factor;
      r.ue8m0 = false;
      r.vec_in = rows_aligned(a.input, a.input_row_stride, element_size, a.m, 16);
      r.vec_out = rows_aligned(a.out, a.out_row_stride, 1, a.out_rows, 16);
      launch_row_quant(a.in_dtype, a.out_dtype, r, s);
      break;
    }
  }
}

void per_token_group_quant_cuda(const PerTokenGroupQuantArgs& a, Stream stream) {
  dispatch_input_and_format(a.in_dtype, a.out_dtype,
                            [&](auto t, auto f) { launch_group_quant<decltype(t), decltype(f)>(a, to_cuda(stream)); });
}

}  // namespace fp8kit::ops
