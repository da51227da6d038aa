// Launchers of the weight-side ops: quantize_weight (per-tensor, per-channel, block), dequantize,
// requantize_with_max_scale and normalize_e4m3fn_to_e4m3fnuz (kernels: quant_weight_kernels.cuh
// and quant_kernels.cuh; reference: quant_weight_ref.cpp). Nothing here waits for the device.
// Tests: tests/gpu/test_quant_weight_cuda.cpp; benchmark: bench/bench_quant.
#include <cfloat>

#include "ops/quant/quant_cuda.h"
#include "ops/quant/quant_launch.cuh"
#include "ops/quant/quant_weight_kernels.cuh"

namespace fp8kit::ops {

using namespace kernels;
using namespace launch;

namespace {

// Spec rule 2 over the whole weight, then rule 1 (quant_weight_ref.cpp): a memset, the absmax,
// the quantization (which derives s = fmaxf(amax / FP8_MAX, FLT_MIN) itself) and a one-thread
// kernel that stores s where the absmax was.
void quantize_weight_per_tensor(const WeightQuantArgs& a, cudaStream_t stream) {
  FP8KIT_CUDA_CHECK(cudaMemsetAsync(a.scale, 0, sizeof(float), stream));
  const size_t element_size = dtype_size(a.in_dtype);
  launch_absmax(a.in_dtype, input_region(a.w, element_size, a.n, a.k, a.w_stride_n, a.w_stride_k), a.w, a.fp8_max,
                a.scale, stream);
  PerTensorQuantParams p{};
  p.in = a.w;
  p.in_col_stride = a.w_stride_k;
  p.out = static_cast<uint8_t*>(a.out);
  p.scale = a.scale;
  p.weight_scale_rule = true;
  p.ue8m0 = a.ue8m0_scales;
  p.fp8_max = a.fp8_max;
  launch_per_tensor_quant(a.in_dtype, a.out_dtype, p, a.n, a.k, a.w_stride_n, a.n, a.k, stream);
  store_weight_scale_kernel<<<1, 1, 0, stream>>>(a.scale, a.ue8m0_scales);
  FP8KIT_CHECK_LAUNCH(stream, "store_weight_scale_kernel");
}

// One block per row of w (quant_weight_ref.cpp treats per-channel as blocks of one row).
void quantize_weight_per_channel(const WeightQuantArgs& a, cudaStream_t stream) {
  const size_t element_size = dtype_size(a.in_dtype);
  RowQuantParams r{};
  r.in = a.w;
  r.in_row_stride = a.w_stride_n;
  r.in_col_stride = a.w_stride_k;
  r.out = static_cast<uint8_t*>(a.out);
  r.out_row_stride = a.k;
  r.scale = a.scale;
  r.rows = a.n;
  r.out_rows = a.n;
  r.cols = a.k;
  r.scale_ub = nullptr;
  r.fp8_max = a.fp8_max;
  r.floor = FLT_MIN;
  r.ue8m0 = a.ue8m0_scales;
  r.vec_in = a.w_stride_k == 1 && rows_aligned(a.w, a.w_stride_n, element_size, a.n, 16);
  r.vec_out = rows_aligned(a.out, a.k, 1, a.n, 16);
  launch_row_quant(a.in_dtype, a.out_dtype, r, stream);
}

template <auto kKernel>
void launch_tiles(const BlockQuantParams& p, cudaStream_t stream) {
  kKernel<<<grid_for_units<kKernel>(p.blocks_n * p.blocks_k), kThreads, 0, stream>>>(p);
  FP8KIT_CHECK_LAUNCH(stream, "block_quant_kernel");
}

// A block of 256 threads per tile, the tile in registers when block_k is 16 times a power of two
// up to 4096 and the tile has at most 16384 elements (128 x 128 included); any other shape reads
// its tile twice.
template <typename T, typename F>
void quantize_weight_blocks(const WeightQuantArgs& a, cudaStream_t stream) {
  BlockQuantParams p{};
  p.w = a.w;
  p.w_stride_n = a.w_stride_n;
  p.w_stride_k = a.w_stride_k;
  p.out = static_cast<uint8_t*>(a.out);
  p.scale = a.scale;
  p.n = a.n;
  p.k = a.k;
  p.block_n = a.block_n;
  p.block_k = a.block_k;
  p.blocks_n = ceil_div(a.n, a.block_n);
  p.blocks_k = ceil_div(a.k, a.block_k);
  p.fp8_max = a.fp8_max;
  p.ue8m0 = a.ue8m0_scales;
  p.vec_in = a.w_stride_k == 1 && rows_aligned(a.w, a.w_stride_n, sizeof(T), a.n, 16);
  p.vec_out = rows_aligned(a.out, a.k, 1, a.n, 16);
  if (p.blocks_n * p.blocks_k == 0) return;
  if (a.block_k % kChunk == 0 && kThreads % (a.block_k / kChunk) == 0) {
    const int64_t chunks = a.block_n * (a.block_k / kChunk);
    if (chunks <= kThreads) return launch_tiles<block_quant_kernel<T, F, 1>>(p, stream);
    if (chunks <= 2 * kThreads) return launch_tiles<block_quant_kernel<T, F, 2>>(p, stream);
    if (chunks <= 4 * kThreads) return launch_tiles<block_quant_kernel<T, F, 4>>(p, stream);
  }
  launch_tiles<block_quant_generic_kernel<T, F>>(p, stream);
}

template <typename Out>
void launch_dequant(const DequantArgs& a, cudaStream_t stream) {
  DequantParams p{};
  p.q = a.q;
  p.q_dtype = a.q_dtype;
  p.scale = a.scale;
  p.scale_dtype = a.scale_dtype;
  p.scale_stride_n = a.scale_stride_n;
  p.scale_stride_k = a.scale_stride_k;
  p.out = a.out;
  const bool one_block = a.block_n >= a.n && a.block_k >= a.k;
  if (one_block && a.q_stride_k == 1 && (a.n <= 1 || a.q_stride_n == a.k)) {
    // One scale over a contiguous q: one row of n * k elements.
    p.q_stride_n = 0;
    p.q_stride_k = 1;
    p.rows = a.n == 0 ? 0 : 1;
    p.cols = a.n * a.k;
    p.block_n = 1;
    p.block_k = std::max<int64_t>(p.cols, 1);
    p.vec_in = aligned(a.q, 16);
    p.vec_out = aligned(a.out, 16);
  } else {
    p.q_stride_n = a.q_stride_n;
    p.q_stride_k = a.q_stride_k;
    p.rows = a.n;
    p.cols = a.k;
    p.block_n = a.block_n;
    p.block_k = a.block_k;
    p.vec_in = a.q_stride_k == 1 && rows_aligned(a.q, a.q_stride_n, 1, a.n, 16);
    p.vec_out = rows_aligned(a.out, a.k, sizeof(Out), a.n, 16);
  }
  if (p.rows * p.cols == 0) return;
  constexpr auto kernel = dequant_kernel<Out>;
  kernel<<<grid_for<kernel>(p.rows * ceil_div(p.cols, kChunk)), kThreads, 0, stream>>>(p);
  FP8KIT_CHECK_LAUNCH(stream, "dequant_kernel");
}

}  // namespace

void quantize_weight_cuda(const WeightQuantArgs& a, Stream stream) {
  const cudaStream_t s = to_cuda(stream);
  switch (a.scheme) {
    case WeightQuantScheme::kPerTensor:
      return quantize_weight_per_tensor(a, s);
    case WeightQuantScheme::kPerChannel:
      return quantize_weight_per_channel(a, s);
    case WeightQuantScheme::kBlock:
      return dispatch_input_and_format(a.in_dtype, a.out_dtype,
                                       [&](auto t, auto f) { quantize_weight_blocks<decltype(t), decltype(f)>(a, s); });
  }
}

void dequantize_cuda(const DequantArgs& a, Stream stream) {
  dispatch_float(a.out_dtype, [&](auto t) { launch_dequant<decltype(t)>(a, to_cuda(stream)); });
}

void requantize_with_max_scale_cuda(const RequantizeArgs& a, Stream stream) {
  const cudaStream_t s = to_cuda(stream);
  RequantParams p{};
  p.w = a.weight;
  p.w_stride_n = a.w_stride_n;
  p.w_stride_k = a.w_stride_k;
  p.k = a.k;
  p.weight_scale = a.weight_scale;
  p.num_shards = a.num_shards;
  p.max_scale = a.max_scale;
  p.fp8_max = a.fp8_max;
  p.vec = a.w_stride_k == 1 && rows_aligned(a.weight, a.w_stride_n, 1, a.n, 16);
  // logical_widths is host memory: each launch gets its shards' row offsets by value.
  int64_t row = 0;
  for (int64_t first = 0; first < a.num_shards; first += kMaxRequantShards) {
    p.write_max_scale = first == 0;
    p.first_shard = first;
    p.launch_shards = int(std::min<int64_t>(kMaxRequantShards, a.num_shards - first));
    p.row_begin[0] = row;
    for (int i = 0; i < p.launch_shards; ++i) {
      row += a.logical_widths[first + i];
      p.row_begin[i + 1] = row;
    }
    const int64_t items = (p.row_begin[p.launch_shards] - p.row_begin[0]) * ceil_div(a.k, kChunk);
    dispatch_e4m3(a.weight_dtype, [&](auto f) {
      constexpr auto kernel = requant_kernel<decltype(f)>;
      kernel<<<grid_for<kernel>(items), kThreads, 0, s>>>(p);
      FP8KIT_CHECK_LAUNCH(s, "requant_kernel");
    });
  }
}

void normalize_e4m3fn_to_e4m3fnuz_cuda(const FnuzNormalizeArgs& a, Stream stream) {
  const cudaStream_t s = to_cuda(stream);
  const FnuzParams p{a.weight,
                     a.out,
                     a.numel,
                     aligned(a.weight, 16) && aligned(a.out, 16),
                     a.weight_scale,
                     a.weight_scale_out,
                     a.weight_scale_numel,
                     a.input_scale,
                     a.input_scale_out,
                     a.input_scale_numel};
  const int64_t items = std::max({ceil_div(a.numel, kChunk), a.weight_scale_numel, a.input_scale_numel});
  if (items == 0) return;
  fnuz_kernel<<<grid_for<fnuz_kernel>(items), kThreads, 0, s>>>(p);
  FP8KIT_CHECK_LAUNCH(s, "fnuz_kernel");
}

}  // namespace fp8kit::ops
