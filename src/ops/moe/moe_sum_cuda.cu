// moe_sum_kernel: out[m, :] = sum over k of input[m, k, :]. Reference: moe_sum_ref.cpp (same
// MoeSumArgs), bit for bit: the same f32 adds in the same order (k = 0, 1, ...), with a rounding
// to T after every add when accumulate_in_scalar (vLLM's kernel for top_k 2..4), else one
// rounding at the end (at::sum's rule, in a fixed order). Tests: tests/gpu/test_moe_activation_cuda.cpp.
// Floor: memory-bound, (top_k + 1) * m * d * sizeof(T) bytes over ~4.3 TB/s, e.g. m = 4096,
// top_k = 8, d = 7168, bf16: 529 MB -> 123 us.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/cuda/cuda_check.h"
#include "core/cuda/pdl.cuh"
#include "fp8kit/half.h"
#include "ops/moe/moe_sum_cuda.h"

namespace fp8kit::ops {
namespace {

// Loads in flight together: the slots of a token (a batch of them) and the splits of a slot. One
// at a time, each sum waited for a memory round trip per term (a decode step's moe_sum, 8 slots of
// 2,048 columns, took ~6.8 us on the H200).
constexpr int kBatch = 8;

// The slot value (row `slot`, columns c .. c + V) of split-K partial sums: T(sum over splits, in
// order) as a float.
template <typename T, int V>
__device__ __forceinline__ void split_values(const MoeSumArgs& a, int64_t slot, int64_t c, float (&v)[V]) {
  const int64_t split_stride = a.m * a.top_k * a.d;
  const float* p = a.partials + slot * a.d + c;
#pragma unroll
  for (int j = 0; j < V; ++j) v[j] = 0.0f;
  constexpr int kSplitBatch = V >= 8 ? 2 : 4;  // keeps the registers of the loads in flight near 16
  for (int64_t s0 = 0; s0 < a.splits; s0 += kSplitBatch) {
    float x[kSplitBatch][V];
#pragma unroll
    for (int b = 0; b < kSplitBatch; ++b) {
      if (s0 + b < a.splits) {
        const float* q = p + (s0 + b) * split_stride;
#pragma unroll
        for (int j = 0; j < V; ++j) x[b][j] = q[j];
      }
    }
#pragma unroll
    for (int b = 0; b < kSplitBatch; ++b) {
      if (s0 + b < a.splits) {
#pragma unroll
        for (int j = 0; j < V; ++j) v[j] = __fadd_rn(v[j], x[b][j]);
      }
    }
  }
#pragma unroll
  for (int j = 0; j < V; ++j) v[j] = to_float(from_float<T>(v[j]));
}

// V elements per thread (16 bytes when d allows it, else 1); flat index over m x d / V. kSplits:
// the slot values come from split-K partial sums (MoeSumArgs::partials).
template <typename T, bool kScalarAccumulate, int V, bool kSplits>
__global__ void moe_sum_kernel(const MoeSumArgs a) {
  cuda::pdl_wait();  // launched by launch_pdl (core/cuda/pdl.cuh)
  cuda::pdl_allow_dependents();
  struct alignas(sizeof(T) * V) Pack {
    T v[V];
  };
  const T* in = static_cast<const T*>(a.input);
  T* out = static_cast<T*>(a.out);
  const int64_t dv = a.d / V, total = a.m * dv;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = i / dv, c = (i % dv) * V;
    float x[V];
#pragma unroll
    for (int j = 0; j < V; ++j) x[j] = 0.0f;
    for (int64_t k0 = 0; k0 < a.top_k; k0 += kBatch) {
      float y[kBatch][V];
      if constexpr (kSplits) {
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
          if (k0 + b < a.top_k) split_values<T, V>(a, t * a.top_k + k0 + b, c, y[b]);
        }
      } else {
        int64_t row[kBatch];  // of input: the slot, or where row_of_slot puts it (-1: zeros)
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
          row[b] = k0 + b < a.top_k ? t * a.top_k + k0 + b : -1;
          if (a.row_of_slot != nullptr && row[b] >= 0) row[b] = a.row_of_slot[row[b]];
        }
        Pack p[kBatch];
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
          if (row[b] >= 0) p[b] = *reinterpret_cast<const Pack*>(in + row[b] * a.d + c);
        }
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
#pragma unroll
          for (int j = 0; j < V; ++j) y[b][j] = row[b] >= 0 ? to_float(p[b].v[j]) : 0.0f;
        }
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        if (k0 + b >= a.top_k) break;
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const float s = __fadd_rn(x[j], y[b][j]);
          x[j] = kScalarAccumulate ? to_float(from_float<T>(s)) : s;
        }
      }
    }
    Pack y;
#pragma unroll
    for (int j = 0; j < V; ++j) y.v[j] = from_float<T>(x[j]);
    *reinterpret_cast<Pack*>(out + t * a.d + c) = y;
  }
}

template <typename T, bool kScalarAccumulate, bool kSplits>
void launch(const MoeSumArgs& a, cudaStream_t s) {
  constexpr int kVec = int(16 / sizeof(T));
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const bool vec = a.d % kVec == 0 && aligned(a.out) && (kSplits ? aligned(a.partials) : aligned(a.input));
  const int64_t total = a.m * (a.d / (vec ? kVec : 1));
  constexpr int kThreads = 256;
  const int64_t blocks = std::clamp<int64_t>((total + kThreads - 1) / kThreads, 1, 132 * 32);
  if (vec) {
    cuda::launch_pdl(moe_sum_kernel<T, kScalarAccumulate, kVec, kSplits>, unsigned(blocks), kThreads, 0, s, a);
  } else {
    cuda::launch_pdl(moe_sum_kernel<T, kScalarAccumulate, 1, kSplits>, unsigned(blocks), kThreads, 0, s, a);
  }
  FP8KIT_CHECK_LAUNCH(s, "moe_sum_kernel");
}

template <typename T, bool kScalarAccumulate>
void launch_splits(const MoeSumArgs& a, cudaStream_t s) {
  if (a.partials != nullptr && a.splits > 1) {
    launch<T, kScalarAccumulate, true>(a, s);
  } else {
    launch<T, kScalarAccumulate, false>(a, s);
  }
}

template <typename T>
void launch_dtype(const MoeSumArgs& a, cudaStream_t s) {
  if (a.accumulate_in_scalar) {
    launch_splits<T, true>(a, s);
  } else {
    launch_splits<T, false>(a, s);
  }
}

}  // namespace

void moe_sum_cuda(const MoeSumArgs& args, Stream stream) {
  if (args.m <= 0 || args.d <= 0) return;
  const cudaStream_t s = static_cast<cudaStream_t>(stream.handle);
  if (args.top_k <= 0) {  // an empty sum
    FP8KIT_CUDA_CHECK(cudaMemsetAsync(args.out, 0, size_t(args.m * args.d) * (args.dtype == DType::kF32 ? 4 : 2), s));
    return;
  }
  switch (args.dtype) {
    case DType::kBF16: return launch_dtype<BFloat16>(args, s);
    case DType::kF16: return launch_dtype<Float16>(args, s);
    default: return launch_dtype<float>(args, s);
  }
}

}  // namespace fp8kit::ops
