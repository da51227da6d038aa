// fused_experts on the fast CPU path (src/ops/moe/fused_experts_cpu*.cpp) against the reference
// path of the same call: the same bits on integer-grid problems (every quantization, top_k 1-8,
// routed weight on either side, experts of other ranks, chunks), close on random problems (the
// f32 sums differ in the last bits), e4m3fnuz experts on the reference; and
// plan_cpu_fused_experts. The reference's own exactness is tests/cpu/test_fused_experts_exact.cpp,
// which also runs its grid problems on the fast path (the default).
#include <gtest/gtest.h>

#include "moe_test_util.h"
#include "reference_context.h"
#include "ops/moe/fused_experts_cpu_plan.h"

namespace fp8kit {
namespace {

using namespace moe_test;

std::vector<double> reference_values(const Inputs& in) {
  return values(run(in, cpu_reference_ctx()));
}

struct Config {
  const char* name;
  Quant quant;
  std::optional<std::pair<int64_t, int64_t>> block;
  bool on_input;
  std::optional<float> a1, a2;
};

const std::vector<Config> kConfigs = {
    {"fp8 per-tensor dynamic", Quant::kFp8, std::nullopt, false, std::nullopt, std::nullopt},
    {"fp8 per-tensor static, weight on input", Quant::kFp8, std::nullopt, true, 0.01f, 0.004f},
    {"fp8 block 64", Quant::kFp8, std::make_pair(64, 64), false, std::nullopt, std::nullopt},
    {"weight-only per-tensor", Quant::kWeightOnly, std::nullopt, false, std::nullopt, std::nullopt},
    {"weight-only block 64", Quant::kWeightOnly, std::make_pair(64, 64), false, std::nullopt, std::nullopt},
    {"unquantized", Quant::kNone, std::nullopt, false, std::nullopt, std::nullopt}};

// Grid problems are exact for any summation order while every gate is far from zero (silu then
// is the identity or exactly 0); a routed weight of 1/4 on the input moves weight-only gates to
// about -35, whose silu (~1e-14) an f32 sum absorbs: that case is the random test's.
TEST(FusedExpertsCpu, GridProblemsGiveTheReferenceBits) {
  for (const Config& c : kConfigs) {
    for (const int64_t top_k : {1, 2, 3, 8}) {
      // bf16: the grid problems' sums overflow f16 in the per-tensor weight-only case.
      Problem p = grid_problem(21, 128, 64, 8, top_k, uint32_t(40 + top_k), c.block, DType::kBF16);
      OracleOptions o;
      o.quant = c.quant;
      o.apply_router_weight_on_input = c.on_input && top_k == 1;  // vLLM allows it with top_k 1 only
      o.a1_scale = c.a1;
      o.a2_scale = c.a2;
      Inputs in = inputs(p, o);
      EXPECT_EQ(mismatches(values(run(in)), reference_values(in), c.name), 0) << c.name << " top_k " << top_k;
      // Experts 2 and 5 on another rank (their slots are zero rows here), in chunks of 4 tokens.
      std::vector<int32_t> map(8);
      for (int32_t e = 0, local = 0; e < 8; ++e) map[size_t(e)] = e == 2 || e == 5 ? -1 : local++;
      in.w1 = Tensor::empty({6, in.w1.size(1), in.w1.size(2)}, in.w1.dtype());
      in.w2 = Tensor::empty({6, in.w2.size(1), in.w2.size(2)}, in.w2.dtype());
      const Inputs all = inputs(p, o);
      for (int32_t e = 0; e < 8; ++e) {
        if (map[size_t(e)] < 0) continue;
        std::memcpy(in.w1.select(0, map[size_t(e)]).data_ptr(), all.w1.select(0, e).data_ptr(), all.w1.select(0, e).nbytes());
        std::memcpy(in.w2.select(0, map[size_t(e)]).data_ptr(), all.w2.select(0, e).data_ptr(), all.w2.select(0, e).nbytes());
      }
      for (Tensor* s : {&in.options.w1_scale, &in.options.w2_scale}) {
        if (!s->defined()) continue;
        const Tensor full = s->contiguous();
        Shape shape = full.shape();
        shape[0] = 6;
        Tensor local = Tensor::empty(shape, DType::kF32);
        for (int32_t e = 0; e < 8; ++e) {
          if (map[size_t(e)] >= 0) std::memcpy(local.select(0, map[size_t(e)]).data_ptr(), full.select(0, e).data_ptr(), full.select(0, e).nbytes());
        }
        *s = local;
      }
      in.options.expert_map = Tensor::from_vector(map);
      in.options.global_num_experts = 8;
      in.options.chunk_size = 4;
      EXPECT_EQ(mismatches(values(run(in)), reference_values(in), c.name), 0) << c.name << " top_k " << top_k << ", 2 of 8 experts elsewhere";
    }
  }
}

// Random problems: the last bits of the f32 sums differ, which an output rounding or an FP8 code
// boundary of the intermediate can expose. Measured relative L2 errors against the reference
// path: 0 (FP8 and unquantized, bf16 outputs) and 2.4e-5 / 5.4e-5 (weight-only, f16); bound 1e-3.
TEST(FusedExpertsCpu, RandomProblemsCloseToTheReference) {
  for (const Config& c : kConfigs) {
    const DType dtype = c.quant == Quant::kWeightOnly ? DType::kF16 : DType::kBF16;
    RandomProblem r = random_problem(33, 256, 128, 16, 4, 77, c.block, dtype);
    if (c.quant == Quant::kNone) r.p.w1 = r.w1_real, r.p.w2 = r.w2_real;
    OracleOptions o;
    o.quant = c.quant;
    o.a1_scale = c.a1;
    o.a2_scale = c.a2;
    const Inputs in = inputs(r.p, o);
    const double err = rel_l2_error(values(run(in)), reference_values(in));
    EXPECT_TRUE(err <= 1e-3) << c.name << ": " << err;
  }
}

TEST(FusedExpertsCpu, E4m3fnuzExpertsRunOnTheReference) {
  Problem p = grid_problem(9, 128, 64, 4, 2, 50);
  Inputs in = inputs(p, OracleOptions{});
  in.w1 = in.w1.view_as(DType::kE4M3FNUZ);  // the same codes read as fnuz (half the values)
  in.w2 = in.w2.view_as(DType::kE4M3FNUZ);
  EXPECT_EQ(mismatches(values(run(in)), reference_values(in), "fnuz"), 0);
}

TEST(FusedExpertsCpuPlan, FastUnlessAskedOrFnuzOrOddBlocks) {
  using ops::ExpertQuant;
  ops::cpu::FusedExpertsDesc d;
  d.quant = ExpertQuant::kFp8W8A8;
  d.weight_dtype = DType::kE4M3FN;
  d.isa = CpuIsa::kAvx2;
  EXPECT_TRUE(ops::cpu::plan_cpu_fused_experts(d, {}).fast);
  Overrides reference;
  reference.cpu_backend = CpuBackend::kReference;
  EXPECT_FALSE(ops::cpu::plan_cpu_fused_experts(d, reference).fast);
  d.weight_dtype = DType::kE4M3FNUZ;
  EXPECT_FALSE(ops::cpu::plan_cpu_fused_experts(d, {}).fast);
  d.weight_dtype = DType::kE4M3FN;
  d.block = true;
  d.block_k = 20;
  EXPECT_EQ(ops::cpu::plan_cpu_fused_experts(d, {}).reason, "block_k is not a multiple of 8");
  d.block_k = 128;
  d.isa = CpuIsa::kPortable;
  const ops::cpu::FusedExpertsPlan portable = ops::cpu::plan_cpu_fused_experts(d, {});
  EXPECT_TRUE(portable.fast);
  EXPECT_EQ(portable.isa, CpuIsa::kPortable);
  d.quant = ExpertQuant::kUnquantized;
  d.weight_dtype = DType::kBF16;
  EXPECT_TRUE(ops::cpu::plan_cpu_fused_experts(d, {}).fast);
}

}  // namespace
}  // namespace fp8kit
