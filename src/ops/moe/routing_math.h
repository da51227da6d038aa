// The f32 arithmetic of MoE routing that the CPU reference (routing_ref.cpp) and the CUDA kernels
// (routing_kernels.cuh) share, so that top-k ids are identical and weights bit-identical:
// one exp, explicitly rounded adds and multiplies (nvcc may not fuse them into an FMA), the
// fixed order of the softmax sum, and the order of top-k selection.
// Tested by tests/cpu/test_moe_routing.cpp (exp accuracy) and tests/gpu/test_moe_routing_cuda.cpp.
#pragma once

#include <cmath>
#include <cstdint>

#include "fp8kit/dtype.h"
#include "fp8kit/half.h"
#include "fp8kit/host_device.h"
#include "ops/float_rn.h"

namespace fp8kit::ops::routing {

// The softmax sum runs over kSumLanes partial sums: partial l adds the elements l, l + 32,
// l + 64, ... in ascending order, then the partials are combined as a butterfly (offsets 16, 8,
// 4, 2, 1). That is exactly what a warp does with one partial per lane and __shfl_xor_sync, and
// the reference replays it, so both sides round the same additions.
inline constexpr int kSumLanes = 32;

using ops::add_rn;
using ops::div_rn;
using ops::fma_rn;
using ops::mul_rn;

FP8KIT_HOST_DEVICE float rint_f32(float x) {  // to nearest, ties to even
#if defined(__CUDA_ARCH__)
  return rintf(x);
#else
  return std::rint(x);
#endif
}

FP8KIT_HOST_DEVICE float pow2_f32(int n) {  // 2^n for n in [-126, 127]
  return bits_to_float(uint32_t(n + 127) << 23);
}

// e^x in f32 to about 1 ulp. glibc's expf and CUDA's expf may differ in the last bit, so both
// sides use this one instead: Cody-Waite reduction x = k ln2 + r, |r| <= ln2/2, Cephes' degree-7
// polynomial, and a scale by 2^k in two exact-or-once-rounded steps (subnormal results included;
// neither side flushes them: the build uses no fast-math and no -ftz).
FP8KIT_HOST_DEVICE float exp_f32(float x) {
  if (!(x == x)) return x;
  if (x > 88.72283935546875f) return bits_to_float(0x7f800000u);
  if (x < -103.97208404541016f) return 0.0f;
  const float kf = rint_f32(mul_rn(x, 1.44269502162933349609375f));
  float r = fma_rn(-kf, 0.693359375f, x);
  r = fma_rn(-kf, -2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = fma_rn(p, r, 1.3981999507e-3f);
  p = fma_rn(p, r, 8.3334519073e-3f);
  p = fma_rn(p, r, 4.1665795894e-2f);
  p = fma_rn(p, r, 1.6666665459e-1f);
  p = fma_rn(p, r, 5.0000001201e-1f);
  const float r2 = mul_rn(r, r);
  float y = fma_rn(p, r2, r);
  y = add_rn(y, 1.0f);
  const int k = int(kf);
  if (k > 127) return mul_rn(mul_rn(y, pow2_f32(127)), pow2_f32(k - 127));
  if (k < -126) return mul_rn(mul_rn(y, pow2_f32(k + 126)), pow2_f32(-126));
  return mul_rn(y, pow2_f32(k));
}

// 1 / (1 + e^-x)
FP8KIT_HOST_DEVICE float sigmoid_f32(float x) { return div_rn(1.0f, add_rn(1.0f, exp_f32(-x))); }

// The value an f32 result takes once stored in `dtype` (f32, f16 or bf16) and read back.
FP8KIT_HOST_DEVICE float round_to(DType dtype, float x) {
  if (dtype == DType::kBF16) return bf16_to_float(float_to_bf16(x));
  if (dtype == DType::kF16) return f16_to_float(float_to_f16(x));
  return x;
}

FP8KIT_HOST_DEVICE float load_float(const void* p, DType dtype, int64_t i) {
  if (dtype == DType::kBF16) return bf16_to_float(static_cast<const BFloat16*>(p)[i]);
  if (dtype == DType::kF16) return f16_to_float(static_cast<const Float16*>(p)[i]);
  return static_cast<const float*>(p)[i];
}

FP8KIT_HOST_DEVICE int64_t load_index(const void* p, DType dtype, int64_t i) {
  if (dtype == DType::kI64) return static_cast<const int64_t*>(p)[i];
  return static_cast<const int32_t*>(p)[i];
}

FP8KIT_HOST_DEVICE void store_index(void* p, DType dtype, int64_t i, int64_t v) {
  if (dtype == DType::kI64) {
    static_cast<int64_t*>(p)[i] = v;
  } else {
    static_cast<int32_t*>(p)[i] = int32_t(v);
  }
}

// Top-k is repeated argmax under one total order: the larger key wins, equal keys go to the lower
// index (spec 1.9), and a NaN key counts as -inf so that a row with NaNs still yields valid,
// distinct ids on both sides.
FP8KIT_HOST_DEVICE float selection_key(float v) { return v == v ? v : -bits_to_float(0x7f800000u); }

FP8KIT_HOST_DEVICE bool ranks_before(float key_a, int32_t index_a, float key_b, int32_t index_b) {
  return key_a > key_b || (key_a == key_b && index_a < index_b);
}

// EPLB replica of routed slot `slot` (m * topk + k) among `count` >= 1 replicas. The spec draws
// it with torch.rand_like; here a fixed integer hash of the slot (lowbias32) stands in for the
// draw: reproducible, identical on CPU and GPU, and spread evenly over the replicas, where a
// plain slot % count would send an expert that always sits at the same k to the same replica.
FP8KIT_HOST_DEVICE int64_t eplb_replica(int64_t slot, int64_t count) {
  uint32_t h = uint32_t(slot) ^ uint32_t(uint64_t(slot) >> 32);
  h ^= h >> 16;
  h *= 0x7feb352du;
  h ^= h >> 15;
  h *= 0x846ca68bu;
  h ^= h >> 16;
  return int64_t(h % uint64_t(count));
}

}  // namespace fp8kit::ops::routing
