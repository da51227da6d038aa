// fused_experts on the CPU, exact: integer-grid problems (moe_test_util.h grid_problem) against
// the spec's pipeline recomputed with plain loops (moe_test_util.h oracle, Rounding::kSpec).
// Why the comparison is exact for any accumulation order: x and the FP8 weights are small
// integers and the weight scales and routed weights powers of two, so every GEMM1 sum is an
// integer far below 2^24; every gate row has one sign, so the gate is a large positive or
// negative number and silu/gelu are close to the identity or to zero, which keeps the
// intermediate's nonzero e4m3 codes coarse (multiples of 2^-6 below 448): every GEMM2 sum stays
// below 2^24 units too. What is left, the f32 activation, the f32 scale products and the 16-bit
// roundings, the oracle performs with the spec's formulas in the spec's order.
// The last test compares random inputs the same way: this reference sums in double, so it must
// equal the oracle there too, which pins the order of every f32 operation of the epilogues.
#include <gtest/gtest.h>

#include "moe_test_util.h"
#include "reference_context.h"

namespace fp8kit {
namespace {

using namespace moe_test;

struct ExactCase {
  const char* name;
  int64_t m, h, inter, e, top_k, used_experts;
  std::optional<std::pair<int64_t, int64_t>> block;
  Quant quant;
  std::optional<float> a1 = std::nullopt, a2 = std::nullopt;
  bool gelu = false, on_input = false;
  DType dtype = DType::kBF16;
};

void check_exact(const ExactCase& c, uint32_t seed) {
  SCOPED_TRACE(c.name);
  const Problem p = grid_problem(c.m, c.h, c.inter, c.e, c.top_k, seed, c.block, c.dtype, c.used_experts);
  OracleOptions o;
  o.quant = c.quant;
  o.a1_scale = c.a1;
  o.a2_scale = c.a2;
  o.gelu = c.gelu;
  o.apply_router_weight_on_input = c.on_input;
  const std::vector<double> want = oracle(p, o);
  const std::vector<double> got = values(run(inputs(p, o)));
  EXPECT_EQ(mismatches(got, want, c.name), 0) << "seed " << seed;
  // Guard against a vacuous pass: the result is not all zeros.
  EXPECT_TRUE(std::any_of(want.begin(), want.end(), [](double v) { return v != 0; }));
  EXPECT_TRUE(std::all_of(want.begin(), want.end(), [](double v) { return std::isfinite(v); }));
}

const std::pair<int64_t, int64_t> kBlock64{64, 64};
const std::pair<int64_t, int64_t> kBlockRagged{48, 32};  // partial last row block of every weight

TEST(FusedExpertsExact, PerTensorStaticSilu) {
  check_exact({"E8 top2", 33, 128, 64, 8, 2, -1, std::nullopt, Quant::kFp8, 1.0f / 64, 64.0f}, 1);
  check_exact({"E64 top8, 24 experts idle", 17, 128, 32, 64, 8, 40, std::nullopt, Quant::kFp8, 1.0f / 64, 64.0f}, 2);
  check_exact({"E8 top1", 9, 128, 64, 8, 1, -1, std::nullopt, Quant::kFp8, 1.0f / 64, 64.0f}, 3);
}

TEST(FusedExpertsExact, PerTensorDynamicGelu) {
  check_exact({"E8 top2", 21, 128, 64, 8, 2, -1, std::nullopt, Quant::kFp8, std::nullopt, std::nullopt, true}, 4);
  check_exact({"E64 top8", 12, 128, 32, 64, 8, -1, std::nullopt, Quant::kFp8, std::nullopt, std::nullopt, true}, 5);
}

TEST(FusedExpertsExact, BlockSiluAndGelu) {
  check_exact({"E8 top1 64x64", 19, 128, 64, 8, 1, -1, kBlock64, Quant::kFp8}, 6);
  check_exact({"E64 top8 64x64 gelu", 10, 128, 64, 64, 8, -1, kBlock64, Quant::kFp8, std::nullopt, std::nullopt, true},
              7);
  check_exact({"E8 top2 48x32 ragged", 15, 128, 64, 8, 2, -1, kBlockRagged, Quant::kFp8}, 8);
}

TEST(FusedExpertsExact, ApplyRouterWeightOnInput) {
  check_exact({"per-tensor static", 13, 128, 64, 8, 2, -1, std::nullopt, Quant::kFp8, 1.0f / 64, 64.0f, false, true}, 9);
  check_exact({"block gelu", 11, 128, 64, 8, 1, -1, kBlock64, Quant::kFp8, std::nullopt, std::nullopt, true, true}, 10);
}

TEST(FusedExpertsExact, F16AndF32ComputeTypes) {
  // f16 overflows above 65504: a smaller h and a larger a2 step keep every value finite.
  check_exact({"f16 top3", 14, 32, 16, 8, 3, -1, std::nullopt, Quant::kFp8, 1.0f / 64, 8.0f, false, false, DType::kF16},
              11);
  check_exact({"f32 top8", 6, 128, 32, 8, 8, -1, std::nullopt, Quant::kFp8, 1.0f / 64, 64.0f, false, false, DType::kF32},
              12);
  check_exact({"f32 block top2", 7, 128, 64, 8, 2, -1, kBlock64, Quant::kFp8, std::nullopt, std::nullopt, false, false,
               DType::kF32},
              13);
}

TEST(FusedExpertsExact, UnquantizedAndWeightOnly) {
  check_exact({"unquantized bf16 top2", 16, 128, 64, 8, 2, -1, std::nullopt, Quant::kNone}, 14);
  check_exact({"unquantized f32 top8 gelu", 5, 128, 32, 64, 8, -1, std::nullopt, Quant::kNone, std::nullopt,
               std::nullopt, true, false, DType::kF32},
              15);
  check_exact({"weight-only per-tensor top8", 9, 128, 32, 8, 8, -1, std::nullopt, Quant::kWeightOnly}, 16);
  check_exact({"weight-only block top2 on input", 12, 128, 64, 8, 2, -1, kBlockRagged, Quant::kWeightOnly,
               std::nullopt, std::nullopt, false, true},
              17);
}

TEST(FusedExpertsExact, RandomInputsMatchTheSpecRoundings) {
  // The reference's property (each sum exact, rounded once); the fast backend sums in f32:
  // tests/cpu/test_fused_experts_cpu.cpp.
  struct Case {
    const char* name;
    std::optional<std::pair<int64_t, int64_t>> block;
    Quant quant;
    bool on_input;
    std::optional<float> a1, a2;
  };
  const std::vector<Case> cases = {{"per-tensor dynamic", std::nullopt, Quant::kFp8, false, std::nullopt, std::nullopt},
                                   {"per-tensor static on input", std::nullopt, Quant::kFp8, true, 0.01f, 0.003f},
                                   {"block", kBlock64, Quant::kFp8, true, std::nullopt, std::nullopt},
                                   {"weight-only", kBlockRagged, Quant::kWeightOnly, false, std::nullopt, std::nullopt},
                                   {"unquantized", std::nullopt, Quant::kNone, true, std::nullopt, std::nullopt}};
  // f32 outputs keep the f32 epilogue's last bit, which a bf16 rounding would mostly hide
  // (weight-only takes 16-bit activations only: f16 there).
  for (const Case& c : cases) {
   const DType wide = c.quant == Quant::kWeightOnly ? DType::kF16 : DType::kF32;
   for (const DType dtype : {wide, DType::kBF16}) {
    RandomProblem r = random_problem(19, 128, 64, 8, 3, 18, c.block, dtype);
    if (c.quant == Quant::kNone) r.p.w1 = r.w1_real, r.p.w2 = r.w2_real;
    OracleOptions o;
    o.quant = c.quant;
    o.apply_router_weight_on_input = c.on_input;
    o.a1_scale = c.a1;
    o.a2_scale = c.a2;
    EXPECT_EQ(mismatches(values(run(inputs(r.p, o), cpu_reference_ctx())), oracle(r.p, o), c.name), 0) << dtype_name(dtype);
   }
  }
}

}  // namespace
}  // namespace fp8kit
