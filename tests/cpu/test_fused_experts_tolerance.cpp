// fused_experts on the CPU, random inputs: (b) a calibrated tolerance against the pipeline in
// fp64 (the FP8 quantizations kept, every f32 / 16-bit rounding removed: moe_test_util.h oracle,
// Rounding::kFp64), and (c) a quality bound against the unquantized BF16 MoE on the original
// weights. Metric: mean |y - ref| / mean |ref|, the one of vLLM's MoE tests (spec 2.8).
// Calibration: each case was run with 10 seeds (its seed and the 9 following). Against fp64,
// FP8 W8A8 measured at most 0.022 (the 16-bit roundings before the intermediate's quantization
// move values across e4m3 rounding boundaries, one e4m3 step is 6-12%), weight-only at most
// 0.0045; the tolerances are 0.03 and 0.007. Against the BF16 MoE, FP8 measured at most 0.068
// (four e4m3-rounded operands: x, w1, the intermediate, w2) and weight-only 0.048; the bounds
// are 0.085 and 0.06. vLLM's 0.03 for block MoE compares against dequantized weights, not the
// original ones, so it is not comparable with (c).
#include <gtest/gtest.h>

#include "moe_test_util.h"

namespace fp8kit {
namespace {

using namespace moe_test;

struct RandomCase {
  const char* name;
  int64_t m, h, inter, e, top_k;
  std::optional<std::pair<int64_t, int64_t>> block;
  Quant quant;
  bool gelu = false, on_input = false;
  double tol_fp64;     // mean |y - y64| / mean |y64|
  double tol_quality;  // mean |y - y_bf16| / mean |y_bf16|
};

void check_random(const RandomCase& c, uint32_t seed) {
  SCOPED_TRACE(c.name);
  const RandomProblem r = random_problem(c.m, c.h, c.inter, c.e, c.top_k, seed, c.block);
  OracleOptions o;
  o.quant = c.quant;
  o.gelu = c.gelu;
  o.apply_router_weight_on_input = c.on_input;
  o.rounding = Rounding::kFp64;
  const std::vector<double> got = values(run(inputs(r.p, o)));
  const double err = mean_rel_error(got, oracle(r.p, o));
  EXPECT_TRUE(err <= c.tol_fp64) << "vs fp64: " << err << " seed " << seed;

  // The BF16 MoE: the same routing through unquantized experts holding the original weights.
  Problem bf16 = r.p;
  bf16.w1 = r.w1_real;
  bf16.w2 = r.w2_real;
  OracleOptions ob = o;
  ob.quant = Quant::kNone;
  ob.rounding = Rounding::kSpec;
  const std::vector<double> base = values(run(inputs(bf16, ob)));
  const double quality = mean_rel_error(got, base);
  EXPECT_TRUE(quality <= c.tol_quality) << "vs bf16: " << quality << " seed " << seed;
}

TEST(FusedExpertsTolerance, NanCannotPass) {
  EXPECT_FALSE(mean_rel_error({std::nan(""), 1.0}, {1.0, 1.0}) <= 1.0);
  EXPECT_FALSE(mean_rel_error({1.0}, {std::nan("")}) <= 1.0);
}

TEST(FusedExpertsTolerance, PerTensorDynamic) {
  check_random({"E8 top2", 64, 256, 128, 8, 2, std::nullopt, Quant::kFp8, false, false, 0.03, 0.085}, 21);
  check_random({"E64 top8 gelu", 48, 128, 64, 64, 8, std::nullopt, Quant::kFp8, true, false, 0.03, 0.085}, 22);
}

TEST(FusedExpertsTolerance, Block128) {
  check_random({"E8 top1", 64, 256, 128, 8, 1, std::make_pair(128, 128), Quant::kFp8, false, false, 0.03, 0.085}, 23);
  check_random({"E64 top8 on input", 32, 256, 128, 64, 8, std::make_pair(128, 128), Quant::kFp8, false, true, 0.03, 0.085},
               24);
}

TEST(FusedExpertsTolerance, WeightOnly) {
  check_random({"per-tensor top2", 64, 256, 128, 8, 2, std::nullopt, Quant::kWeightOnly, false, false, 0.007, 0.06}, 25);
  check_random({"block top8", 32, 256, 128, 64, 8, std::make_pair(128, 128), Quant::kWeightOnly, false, false, 0.007, 0.06},
               26);
}

}  // namespace
}  // namespace fp8kit
