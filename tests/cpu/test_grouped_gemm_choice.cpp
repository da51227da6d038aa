// choose_grouped_kernel / choose_grouped_block_m (src/ops/moe/grouped_gemm_choice.h): which
// grouped GEMM the fused MoE takes on which GPU, with which token block, and the forcing overrides
// (their parsing and its errors: tests/cpu/test_overrides.cpp).
#include <gtest/gtest.h>

#include <string>

#include "ops/moe/grouped_gemm_choice.h"

namespace fp8kit::ops {
namespace {

TEST(GroupedGemmChoice, KernelByDeviceAndQuantization) {
  EXPECT_EQ(choose_grouped_kernel(ExpertQuant::kFp8W8A8, 90, MoeGemmOverride::kAuto), GroupedKernel::kWgmma);
  EXPECT_EQ(choose_grouped_kernel(ExpertQuant::kFp8W8A8, 90, MoeGemmOverride::kAuto), GroupedKernel::kWgmma);
  EXPECT_EQ(choose_grouped_kernel(ExpertQuant::kFp8W8A8, 89, MoeGemmOverride::kAuto), GroupedKernel::kMma);   // Ada
  EXPECT_EQ(choose_grouped_kernel(ExpertQuant::kFp8W8A8, 100, MoeGemmOverride::kAuto), GroupedKernel::kMma);  // no wgmma
  EXPECT_EQ(choose_grouped_kernel(ExpertQuant::kFp8W8A8, 86, MoeGemmOverride::kAuto), GroupedKernel::kSimt);  // no FP8 MMA
  EXPECT_EQ(choose_grouped_kernel(ExpertQuant::kFp8W8A8, 80, MoeGemmOverride::kAuto), GroupedKernel::kSimt);
  for (const int sm : {80, 86, 89, 90}) {
    EXPECT_EQ(choose_grouped_kernel(ExpertQuant::kWeightOnly, sm, MoeGemmOverride::kAuto), GroupedKernel::kW8A16) << sm;
    EXPECT_EQ(choose_grouped_kernel(ExpertQuant::kUnquantized, sm, MoeGemmOverride::kAuto), GroupedKernel::kSimt) << sm;
  }
  EXPECT_EQ(choose_grouped_kernel(ExpertQuant::kWeightOnly, 75, MoeGemmOverride::kAuto), GroupedKernel::kSimt);  // no bf16 MMA
}

TEST(GroupedGemmChoice, ForcedKernels) {
  EXPECT_EQ(choose_grouped_kernel(ExpertQuant::kFp8W8A8, 90, MoeGemmOverride::kMma), GroupedKernel::kMma);
  EXPECT_EQ(choose_grouped_kernel(ExpertQuant::kFp8W8A8, 90, MoeGemmOverride::kSimt), GroupedKernel::kSimt);
  EXPECT_EQ(choose_grouped_kernel(ExpertQuant::kFp8W8A8, 80, MoeGemmOverride::kMma), GroupedKernel::kSimt);  // no FP8 MMA there
  EXPECT_EQ(choose_grouped_kernel(ExpertQuant::kWeightOnly, 90, MoeGemmOverride::kMma), GroupedKernel::kW8A16);  // FP8 only
  EXPECT_EQ(choose_grouped_kernel(ExpertQuant::kWeightOnly, 90, MoeGemmOverride::kSimt), GroupedKernel::kSimt);
}

TEST(GroupedGemmChoice, BlockGrowsWithTokensPerExpert) {
  // wgmma: <= 12 slots an expert on average -> 16, <= 384 -> 64, more -> 128.
  EXPECT_EQ(choose_grouped_block_m(2, 8, GroupedKernel::kWgmma, 0), 16);           // Mixtral decode
  EXPECT_EQ(choose_grouped_block_m(12 * 8, 8, GroupedKernel::kWgmma, 0), 16);
  EXPECT_EQ(choose_grouped_block_m(12 * 8 + 1, 8, GroupedKernel::kWgmma, 0), 64);
  EXPECT_EQ(choose_grouped_block_m(32768, 256, GroupedKernel::kWgmma, 0), 64);     // DeepSeek-V3 M = 4096
  EXPECT_EQ(choose_grouped_block_m(384 * 128, 128, GroupedKernel::kWgmma, 0), 64);
  EXPECT_EQ(choose_grouped_block_m(384 * 128 + 1, 128, GroupedKernel::kWgmma, 0), 128);
  EXPECT_EQ(choose_grouped_block_m(8192, 8, GroupedKernel::kWgmma, 0), 128);       // Mixtral M = 4096
  // mma.sync and CUDA cores: <= 32 -> 16, else 64 (never 128).
  for (const GroupedKernel k : {GroupedKernel::kMma, GroupedKernel::kSimt}) {
    EXPECT_EQ(choose_grouped_block_m(32 * 64, 64, k, 0), 16);
    EXPECT_EQ(choose_grouped_block_m(32 * 64 + 1, 64, k, 0), 64);
    EXPECT_EQ(choose_grouped_block_m(1 << 20, 8, k, 0), 64);
  }
  // Weight-only experts: blocks of 16 (the streaming kernel) up to 16 slots an expert, else 128.
  EXPECT_EQ(choose_grouped_block_m(2, 256, GroupedKernel::kW8A16, 0), 16);
  EXPECT_EQ(choose_grouped_block_m(16 * 8, 8, GroupedKernel::kW8A16, 0), 16);
  EXPECT_EQ(choose_grouped_block_m(16 * 8 + 1, 8, GroupedKernel::kW8A16, 0), 128);
  EXPECT_EQ(choose_grouped_block_m(1 << 20, 8, GroupedKernel::kW8A16, 0), 128);
}

TEST(GroupedGemmChoice, ForcedBlocks) {
  EXPECT_EQ(choose_grouped_block_m(1 << 20, 8, GroupedKernel::kWgmma, 16), 16);
  EXPECT_EQ(choose_grouped_block_m(1, 8, GroupedKernel::kMma, 64), 64);
  EXPECT_EQ(choose_grouped_block_m(1, 8, GroupedKernel::kWgmma, 128), 128);
}

TEST(GroupedGemmChoice, KSplitsFillTheGpuAtDecode) {
  // Mixtral-8x7B GEMM2 at M = 1: 3 token blocks x 64 weight tiles, 112 K tiles -> 3 splits.
  EXPECT_EQ(choose_grouped_k_splits(3 * 64, 112, 132, true, 0), 3);
  EXPECT_EQ(choose_grouped_k_splits(3 * 64, 112, 132, false, 0), 1);  // per-tensor: never chosen
  // Enough CTAs already (DeepSeek-V3 GEMM2 at M = 1: 9 x 112): no split.
  EXPECT_EQ(choose_grouped_k_splits(9 * 112, 16, 132, true, 0), 1);
  // Each split keeps >= 8 K tiles: Qwen3-30B-A3B's K = 768 (6 tiles) is never split.
  EXPECT_EQ(choose_grouped_k_splits(9 * 32, 6, 132, true, 0), 1);
  EXPECT_EQ(choose_grouped_k_splits(1, 24, 132, true, 0), 3);
  EXPECT_EQ(choose_grouped_k_splits(0, 24, 132, true, 0), 1);
}

TEST(GroupedGemmChoice, ForcedKSplits) {
  EXPECT_EQ(choose_grouped_k_splits(3 * 64, 112, 132, true, 1), 1);
  EXPECT_EQ(choose_grouped_k_splits(3 * 64, 112, 132, false, 4), 4);
  EXPECT_EQ(choose_grouped_k_splits(3 * 64, 6, 132, true, 64), 6);  // at most one a K tile
}

}  // namespace
}  // namespace fp8kit::ops
