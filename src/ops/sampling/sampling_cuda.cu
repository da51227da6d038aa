// Greedy sampling on CUDA (sampling_cuda.h): a block per row, three passes over the row (the max
// with its id and the faults; the sum of exp(x - max) in double; the rank), each reduced across
// the block.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/cuda/cuda_check.h"
#include "ops/cuda_elements.cuh"
#include "ops/sampling/sampling_cuda.h"

namespace fp8kit::ops {
namespace {

constexpr int kThreads = 512, kWarps = kThreads / 32;
constexpr int64_t kNone = INT64_MAX;

struct Best {
  float x;
  int64_t id;
};

__device__ __forceinline__ Best better(Best a, Best b) {
  return (b.x > a.x || (b.x == a.x && b.id < a.id)) ? b : a;
}

template <typename V, typename Op>
__device__ V block_reduce(V v, Op op, V* shared) {
  for (int o = 16; o > 0; o /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // shared may still be read by the previous reduction
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = shared[0];
  for (int w = 1; w < kWarps; ++w) v = op(v, shared[w]);
  return v;
}

__device__ Best block_best(Best b, Best* shared) {
  for (int o = 16; o > 0; o /= 2) {
    const Best other{__shfl_xor_sync(0xffffffffu, b.x, o), __shfl_xor_sync(0xffffffffu, b.id, o)};
    b = better(b, other);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) shared[warp] = b;
  __syncthreads();
  b = shared[0];
  for (int w = 1; w < kWarps; ++w) b = better(b, shared[w]);
  return b;
}

template <typename T>
__global__ void __launch_bounds__(kThreads) greedy_sample_kernel(const GreedySampleArgs a) {
  __shared__ Best best_shared[kWarps];
  __shared__ int64_t int_shared[kWarps];
  __shared__ double sum_shared[kWarps];
  const int64_t r = blockIdx.x;
  const T* row = static_cast<const T*>(a.logits) + r * a.row_stride;
  Best best{-INFINITY, kNone};
  int64_t nan_id = kNone, inf_id = kNone, finite = 0;
  for (int64_t v = threadIdx.x; v < a.vocab; v += kThreads) {
    const float x = elements::widen(row[v]);
    if (isnan(x)) {
      nan_id = min(nan_id, v);
    } else if (x == INFINITY) {
      inf_id = min(inf_id, v);
    } else {
      finite |= x != -INFINITY ? 1 : 0;
      best = better(best, Best{x, v});
    }
  }
  best = block_best(best, best_shared);
  const auto min_op = [](int64_t p, int64_t q) { return p < q ? p : q; };
  nan_id = block_reduce<int64_t>(nan_id, min_op, int_shared);
  inf_id = block_reduce<int64_t>(inf_id, min_op, int_shared);
  finite = block_reduce<int64_t>(finite, [](int64_t p, int64_t q) { return p | q; }, int_shared);

  const double m = double(best.x);
  double sum = 0.0;
  for (int64_t v = threadIdx.x; v < a.vocab; v += kThreads) sum += exp(double(elements::widen(row[v])) - m);
  sum = block_reduce<double>(sum, [](double p, double q) { return p + q; }, sum_shared);
  const double lse = m + log(sum);
  const float chosen = float(m - lse);
  int64_t rank = 0;
  for (int64_t v = threadIdx.x; v < a.vocab; v += kThreads) {
    rank += float(double(elements::widen(row[v])) - lse) >= chosen ? 1 : 0;
  }
  rank = block_reduce<int64_t>(rank, [](int64_t p, int64_t q) { return p + q; }, int_shared);
  if (threadIdx.x == 0) {
    a.token_ids[r] = best.id;
    a.logprobs[r] = chosen;
    a.ranks[r] = rank;
    a.faults[3 * r] = nan_id == kNone ? -1 : nan_id;
    a.faults[3 * r + 1] = inf_id == kNone ? -1 : inf_id;
    a.faults[3 * r + 2] = finite ? 0 : 1;
  }
}

}  // namespace

void greedy_sample_cuda(const GreedySampleArgs& a, Stream stream) {
  if (a.num_seqs == 0) return;
  const cudaStream_t s = static_cast<cudaStream_t>(stream.handle);
  switch (a.dtype) {
    case DType::kBF16: greedy_sample_kernel<BFloat16><<<unsigned(a.num_seqs), kThreads, 0, s>>>(a); break;
    case DType::kF16: greedy_sample_kernel<Float16><<<unsigned(a.num_seqs), kThreads, 0, s>>>(a); break;
    default: greedy_sample_kernel<float><<<unsigned(a.num_seqs), kThreads, 0, s>>>(a); break;
  }
  FP8KIT_CHECK_LAUNCH(s, "greedy_sample_kernel");
}

}  // namespace fp8kit::ops
