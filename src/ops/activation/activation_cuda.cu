// act_and_mul_kernel: silu_and_mul / gelu_and_mul on CUDA. Reference: activation_ref.cpp (same
// ActAndMulArgs): out = T(T(act(float(gate))) * up). Tests: tests/gpu/test_moe_activation_cuda.cpp.
// Floor: memory-bound, 3 * rows * d * sizeof(T) bytes (2d read, d written) over ~4.3 TB/s, e.g.
// rows = 32768, d = 2048, bf16: 403 MB -> 94 us.
//
// Rounding: every f32 operation is written with an explicit _rn intrinsic (no FMA contraction),
// in the reference's order. The transcendental is the one place where the math library matters:
// glibc's expf / erff are (nearly) correctly rounded while CUDA's expf / erff allow 2 ulp, so the
// kernel evaluates exp and erf in double and rounds to float: the correctly rounded f32 value
// except within ~2^-29 of a midpoint. Where glibc's float function is itself off by one ulp
// (erff: up to 1 ulp), the f32 activation differs by one ulp, which changes a 16-bit result only
// when the value sits next to a rounding midpoint of T (about 2^-16 of bf16 values, 2^-13 of f16
// values), and then by one ulp of T; an f32 result then differs by a few ulp. The GPU test
// states these bounds.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/cuda/cuda_check.h"
#include "fp8kit/half.h"
#include "ops/activation/activation_cuda.h"

namespace fp8kit::ops {
namespace {

// silu_f32 of activation_ref.cpp: x / (1 + exp(-x)).
__device__ __forceinline__ float silu_f32(float x) {
  const float e = float(exp(-double(x)));
  return __fdiv_rn(x, __fadd_rn(1.0f, e));
}

// gelu_f32 of activation_ref.cpp: x * 0.5f * (1.0f + erf(x * float(M_SQRT1_2))), left to right.
__device__ __forceinline__ float gelu_f32(float x) {
  constexpr float kSqrt1_2 = 0.70710678118654752440f;  // float(M_SQRT1_2)
  const float erf_x = float(erf(double(__fmul_rn(x, kSqrt1_2))));
  return __fmul_rn(__fmul_rn(x, 0.5f), __fadd_rn(1.0f, erf_x));
}

template <typename T, bool kSilu>
__device__ __forceinline__ T act_and_mul_one(T gate, T up) {
  const float g = to_float(gate);
  const float act = to_float(from_float<T>(kSilu ? silu_f32(g) : gelu_f32(g)));  // rounded to T first
  return from_float<T>(__fmul_rn(act, to_float(up)));  // exact for 16-bit T: one rounding, as T * T
}

// V elements per thread (16 bytes when the rows allow it, else 1). Flat index over rows x d / V,
// grid-stride; row r's gate at x + r * ldx, up at gate + d.
template <typename T, bool kSilu, int V>
__global__ void act_and_mul_kernel(const ActAndMulArgs a) {
  struct alignas(sizeof(T) * V) Pack {
    T v[V];
  };
  const T* x = static_cast<const T*>(a.x);
  T* out = static_cast<T*>(a.out);
  const int64_t dv = a.d / V, total = a.rows * dv;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / dv, c = (i % dv) * V;
    const T* row = x + r * a.ldx;
    const Pack gate = *reinterpret_cast<const Pack*>(row + c);
    const Pack up = *reinterpret_cast<const Pack*>(row + a.d + c);
    Pack y;
#pragma unroll
    for (int j = 0; j < V; ++j) y.v[j] = act_and_mul_one<T, kSilu>(gate.v[j], up.v[j]);
    *reinterpret_cast<Pack*>(out + r * a.ldo + c) = y;
  }
}

template <typename T, bool kSilu>
void launch(const ActAndMulArgs& a, cudaStream_t s) {
  constexpr int kVec = int(16 / sizeof(T));
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const bool vec = a.d % kVec == 0 && a.ldx % kVec == 0 && a.ldo % kVec == 0 && aligned(a.x) && aligned(a.out);
  const int64_t per_thread = vec ? kVec : 1;
  const int64_t total = a.rows * (a.d / per_thread);
  constexpr int kThreads = 256;
  const int64_t blocks = std::clamp<int64_t>((total + kThreads - 1) / kThreads, 1, 132 * 32);
  if (vec) {
    act_and_mul_kernel<T, kSilu, kVec><<<unsigned(blocks), kThreads, 0, s>>>(a);
  } else {
    act_and_mul_kernel<T, kSilu, 1><<<unsigned(blocks), kThreads, 0, s>>>(a);
  }
  FP8KIT_CHECK_LAUNCH(s, "act_and_mul_kernel");
}

template <typename T>
void launch_dtype(const ActAndMulArgs& a, cudaStream_t s) {
  if (a.activation == GatedActivation::kSilu) {
    launch<T, true>(a, s);
  } else {
    launch<T, false>(a, s);
  }
}

}  // namespace

void act_and_mul_cuda(const ActAndMulArgs& args, Stream stream) {
  if (args.rows <= 0 || args.d <= 0) return;
  const cudaStream_t s = static_cast<cudaStream_t>(stream.handle);
  switch (args.dtype) {
    case DType::kBF16: return launch_dtype<BFloat16>(args, s);
    case DType::kF16: return launch_dtype<Float16>(args, s);
    default: return launch_dtype<float>(args, s);
  }
}

}  // namespace fp8kit::ops
