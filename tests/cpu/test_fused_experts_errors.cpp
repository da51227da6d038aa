// fused_experts argument checks: vLLM's texts for the checks it makes (spec 1.10), fp8kit's own
// for the quantization arguments, the expert map and the routing ids.
#include <gtest/gtest.h>

#include "expect_error.h"
#include "test_context.h"
#include "moe_test_util.h"

namespace fp8kit {
namespace {

using namespace moe_test;
using testing::expect_invalid;

Inputs fp8_inputs() { return inputs(grid_problem(4, 64, 32, 4, 2, 41), OracleOptions{}); }

TEST(FusedExpertsErrors, SpecTexts) {
  Inputs in = fp8_inputs();
  expect_invalid([&] { ops::fused_experts(cpu_ctx(), Tensor::zeros({4, 32}, DType::kBF16), in.w1, in.w2, in.weights, in.ids, in.options); },
                 "Hidden size mismatch 32 != 64");
  expect_invalid([&] { ops::fused_experts(cpu_ctx(), in.x, in.w1, in.w2, in.weights.narrow(1, 0, 1), in.ids, in.options); },
                 "topk shape mismatch");
  const Tensor wide = Tensor::zeros({4, 128}, DType::kBF16);
  expect_invalid([&] { ops::fused_experts(cpu_ctx(), wide.narrow(1, 0, 64), in.w1, in.w2, in.weights, in.ids, in.options); },
                 "Hidden_states must be contiguous");
  expect_invalid([&] { ops::fused_experts(cpu_ctx(), in.x, in.w1.transpose(1, 2).contiguous().transpose(1, 2), in.w2, in.weights,
                                          in.ids, in.options); },
                 "Stride of last dimension must be 1");
  in.options.activation = "relu";
  expect_invalid([&] { run(in); }, "Unsupported FusedMoe activation: relu");
}

TEST(FusedExpertsErrors, DtypesAndShapes) {
  Inputs in = fp8_inputs();
  expect_invalid([&] { ops::fused_experts(cpu_ctx(), Tensor::zeros({4, 64}, DType::kI32), in.w1, in.w2, in.weights, in.ids, in.options); },
                 "fused_experts: `hidden_states` must be f32, f16 or bf16, got i32[4, 64] on cpu");
  expect_invalid([&] { ops::fused_experts(cpu_ctx(), in.x, in.w1, in.w1, in.weights, in.ids, in.options); },
                 "fused_experts: `w2` must be [E, H, I] = [4, 64, 32], got e4m3fn[4, 64, 64] on cpu");
  Inputs plain = in;
  plain.options = {};
  expect_invalid([&] { run(plain); },
                 "fused_experts: unquantized experts need `w1` and `w2` of hidden_states' dtype bf16, got "
                 "e4m3fn[4, 64, 64] on cpu and e4m3fn[4, 64, 32] on cpu");
  Inputs both = in;
  both.options.weight_only = true;
  expect_invalid([&] { run(both); }, "fused_experts: `use_fp8_w8a8` and `weight_only` exclude each other");
}

TEST(FusedExpertsErrors, Scales) {
  Inputs in = fp8_inputs();
  Inputs missing = in;
  missing.options.w2_scale = Tensor();
  expect_invalid([&] { run(missing); }, "fused_experts: `w2_scale` is an undefined tensor");
  Inputs bad = in;
  bad.options.w1_scale = Tensor::zeros({3}, DType::kF32);
  expect_invalid([&] { run(bad); },
                 "fused_experts: `w1_scale` must hold one scale per expert ([E] or [E, 1], E = 4), got f32[3] on cpu");
  Inputs blk = in;
  blk.options.block_shape = std::make_pair(32, 32);
  expect_invalid([&] { run(blk); },
                 "fused_experts: `w1_scale` must be [E, ceil(64 / block_n), ceil(64 / block_k)] = [4, 2, 2], got f32[4] "
                 "on cpu");
  blk.options.w1_scale = Tensor::zeros({4, 2, 2}, DType::kF32);
  blk.options.w2_scale = Tensor::zeros({4, 2, 1}, DType::kF32);
  blk.options.a1_scale = Tensor::scalar_f32(1.0f);
  expect_invalid([&] { run(blk); },
                 "fused_experts: `a1_scale` (a static activation scale) needs `use_fp8_w8a8` with per-tensor weight "
                 "scales");
  blk.options.a1_scale = Tensor();
  blk.options.block_shape = std::make_pair(32, 48);
  blk.options.w1_scale = Tensor::zeros({4, 2, 2}, DType::kF32);
  blk.options.w2_scale = Tensor::zeros({4, 2, 1}, DType::kF32);
  expect_invalid([&] { run(blk); }, "the last dimension of `x` 64 must be divisible by `group_size` 48");
}

TEST(FusedExpertsErrors, ExpertIdsAndMap) {
  Inputs in = fp8_inputs();
  Inputs bad_id = in;
  bad_id.ids = bad_id.ids.clone();
  bad_id.ids.data<int32_t>()[3] = 4;
  expect_invalid([&] { run(bad_id); },
                 "fused_experts: `topk_ids` holds expert 4 (token 1), outside [0, global_num_experts = 4)");
  Inputs map = in;
  map.options.global_num_experts = 6;
  expect_invalid([&] { run(map); },
                 "fused_experts: without `expert_map`, global_num_experts (6) must equal the experts of w1 (4)");
  map.options.expert_map = Tensor::from_vector(std::vector<int32_t>{0, 1, 2, 3, -1});
  expect_invalid([&] { run(map); }, "fused_experts: `expert_map` must be i32 [global_num_experts] = [6], got i32[5] on cpu");
  map.options.expert_map = Tensor::from_vector(std::vector<int32_t>{0, 1, 2, 3, -1, 7});
  map.ids = map.ids.clone();
  map.ids.data<int32_t>()[0] = 5;
  expect_invalid([&] { run(map); }, "fused_experts: expert 5 maps to local expert 7, outside [-1, E = 4)");
}

}  // namespace
}  // namespace fp8kit
