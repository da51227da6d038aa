// The fused MoE layer's activation and requantization (steps 4 and 5 of fused_experts_ref.cpp) in
// one pass over the intermediate: q = quantize(T(T(act(gate)) * up)), the same bits as
// act_and_mul_cuda followed by scaled_fp8_quant / per_token_group_quant on its output. Used by
// fused_experts_cuda.cpp; kernels: moe_act_quant_cuda.cu; tests: tests/gpu/test_moe_act_quant_cuda.cpp.
#pragma once

#include <cstdint>
#include <string>

#include "fp8kit/stream.h"
#include "ops/activation/activation_args.h"

namespace fp8kit::ops {

enum class ActQuantScaling : uint8_t {
  kStaticTensor,   // scale[0] given: q = cvt(clamp(y * (1 / scale[0])))
  kDynamicTensor,  // scale[0] = max|y| / fp8_max written, then as kStaticTensor
  kGroup128,       // scale[r, g] = fmaxf(max|y[r, 128 g ..]|, eps) / fp8_max written, q = cvt(clamp(y / s))
};

struct ActQuantArgs {
  // rows, d, x, ldx, dtype, activation as act_and_mul. act.out ([rows, d] of dtype, row stride
  // act.ldo) holds y between the two passes of kDynamicTensor (past 8,192 elements; below, one
  // block keeps y in registers); the other scalings do not touch it.
  ActAndMulArgs act;
  // Device [1] or null: rows from min(*rows_in_use, act.rows) on are neither read nor written (the
  // sorted prefill path's rows past num_tokens_post_padded).
  const int32_t* rows_in_use = nullptr;
  ActQuantScaling scaling = ActQuantScaling::kDynamicTensor;
  uint8_t* q = nullptr;  // [rows, d] of q_dtype, row stride ldq
  int64_t ldq = 0;
  DType q_dtype = DType::kE4M3FN;
  float fp8_max = 448.0f;
  float eps = 1e-10f;                   // kGroup128
  const float* static_scale = nullptr;  // kStaticTensor: [1]
  float* scale = nullptr;               // written: kDynamicTensor [1], kGroup128 [rows, d / 128] row-major
  // kDynamicTensor: *scale was set to 0 in stream order before this call (by the caller, ahead
  // of the kernel before it), so no memset is queued here.
  bool scale_zeroed = false;
  // kDynamicTensor, with scale_zeroed: a device counter zeroed with *scale. Where the two-pass
  // sizes fit one wave of blocks (act_and_quant_one_wave), one launch then keeps y in registers
  // across a grid barrier on it instead of writing and reading it back.
  uint32_t* grid_counter = nullptr;
};

#if FP8KIT_WITH_CUDA
// Empty when act_and_quant_cuda serves `a`, else why not (the caller then runs the two ops): bf16
// or f16 in, e4m3fn out, d a multiple of 16 (of 128 for kGroup128), rows 16-byte aligned, at most
// 2^31 runs of 16 elements.
std::string act_and_quant_rejects(const ActQuantArgs& a);

// Whether kDynamicTensor over rows x d takes the two passes (an atomic max into *scale, which
// must start at zero) rather than the one-block pass that writes *scale.
bool act_and_quant_two_pass(int64_t rows, int64_t d);
// Whether those two passes fit one launch of at most one block a multiprocessor (grid_counter).
bool act_and_quant_one_wave(int64_t rows, int64_t d);

// Queued on `stream`, no host synchronization; kDynamicTensor past 8,192 elements is two launches
// (and a memset of the scale unless scale_zeroed), or one with grid_counter where they fit one
// wave; everything else one launch.
void act_and_quant_cuda(const ActQuantArgs& a, Stream stream);
#endif

}  // namespace fp8kit::ops
