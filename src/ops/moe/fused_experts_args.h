// Argument block of fused_experts (include/fp8kit/ops/moe_experts.h), validated by
// fused_experts.cpp. The CPU reference (fused_experts_ref.cpp) composes the quantization, GEMM,
// activation and sum references on these tensors; fused_experts_cuda.cpp takes the same struct.
#pragma once

#include <cstdint>

#include "fp8kit/runtime/forward_context.h"
#include "fp8kit/tensor.h"
#include "ops/activation/activation_args.h"

namespace fp8kit::ops {

enum class ExpertQuant : uint8_t {
  kUnquantized,  // 16-bit (or f32) weights of hidden_states' dtype
  kFp8W8A8,      // FP8 weights and activations (the Triton path)
  kWeightOnly,   // FP8 weights, activations stay 16-bit (the Marlin path)
};

struct FusedExpertsArgs {
  Tensor hidden_states;  // [M, H] f32|f16|bf16, contiguous
  Tensor w1;             // [E, 2I, H], last dimension contiguous
  Tensor w2;             // [E, H, I], last dimension contiguous
  Tensor topk_weights;   // f32 [M, top_k]
  Tensor topk_ids;       // i32|i64 [M, top_k]: global expert ids
  Tensor out;            // [M, H] of hidden_states' dtype, contiguous (hidden_states when inplace)
  int64_t num_tokens = 0, hidden_size = 0, intermediate_size = 0, top_k = 0;
  int64_t num_experts = 0;         // E, the local experts
  int64_t global_num_experts = 0;  // range of topk_ids
  Tensor expert_map;               // i32 [global_num_experts]: local expert or -1; undefined: identity

  ExpertQuant quant = ExpertQuant::kUnquantized;
  bool block = false;  // block scales {block_n, block_k} (kFp8W8A8, kWeightOnly)
  int64_t block_n = 0, block_k = 0;
  Tensor w1_scale, w2_scale;  // f32: per-tensor [E] (any shape of E elements) or block [E, nb, kb]
  Tensor a1_scale, a2_scale;  // f32 one element (static) or undefined (dynamic); kFp8W8A8 per-tensor

  GatedActivation activation = GatedActivation::kSilu;
  bool apply_router_weight_on_input = false;
  int64_t chunk_size = 32768;  // tokens per chunk, >= 1
  bool fast_accum = false;     // FusedExpertsOptions::fast_accum or the context's moe_fast_accum
  // The caller's context (valid for the call): the stream, the workspace the CUDA path takes its
  // scratch from, the overrides its plan reads, and the quantization ops the steps call.
  const ForwardContext* ctx = nullptr;
};

// Step 3 of the layer: the gated activation of C1 [rows, 2I] (contiguous rows) into C2 [rows, I].
inline ActAndMulArgs gated_activation_args(const FusedExpertsArgs& a, const Tensor& c1, const Tensor& c2) {
  ActAndMulArgs act;
  act.rows = c1.size(0);
  act.d = a.intermediate_size;
  act.x = c1.data_ptr();
  act.ldx = 2 * a.intermediate_size;
  act.out = c2.data_ptr();
  act.ldo = a.intermediate_size;
  act.dtype = c1.dtype();
  act.activation = a.activation;
  return act;
}

}  // namespace fp8kit::ops
