// GemmDesc -> GemmConfig: which backend serves which scaled_mm problem, and why not the others.
#include <gtest/gtest.h>

#include <cstdlib>

#include "fp8kit/error.h"
#include "ops/gemm/gemm_config.h"

namespace fp8kit::ops {
namespace {

GemmDesc aligned(int64_t m, int64_t n, int64_t k, int arch = 90) {
  GemmDesc d;
  d.m = m;
  d.n = n;
  d.k = k;
  d.lda = k;
  d.ldb = k;
  d.ldc = n;
  d.arch = arch;
  return d;
}

TEST(GemmConfig, CublasLtServesAlignedProblems) {
  unsetenv("FP8KIT_GEMM_BACKEND");
  for (ScaleKind a : {ScaleKind::kTensor, ScaleKind::kRow}) {
    for (ScaleKind b : {ScaleKind::kTensor, ScaleKind::kRow}) {
      GemmDesc d = aligned(16, 6144, 4096);
      d.scale_a = a;
      d.scale_b = b;
      EXPECT_EQ(select_gemm(d).backend, GemmBackend::kCublasLt);
    }
  }
  GemmDesc blk = aligned(2048, 7168, 18432);
  blk.scale_a = blk.scale_b = ScaleKind::kBlock;
  blk.block_n = blk.block_k = 128;
  blk.scale_a_column_major = true;
  EXPECT_EQ(select_gemm(blk).backend, GemmBackend::kCublasLt);
}

TEST(GemmConfig, RaggedOrUnsupportedProblemsFallBackWithAReason) {
  unsetenv("FP8KIT_GEMM_BACKEND");
  EXPECT_EQ(select_gemm(aligned(3, 129, 127)).reason, "cublaslt: K is not a multiple of 16");
  GemmDesc odd_n = aligned(3, 129, 128);
  EXPECT_EQ(select_gemm(odd_n).reason, "cublaslt: the output row stride is not a multiple of 16 bytes");
  EXPECT_EQ(select_gemm(aligned(16, 256, 256, 80)).reason, "cublaslt: no FP8 tensor cores before sm_89");
  GemmDesc blk = aligned(16, 256, 512);
  blk.scale_a = blk.scale_b = ScaleKind::kBlock;
  blk.block_n = 64;
  blk.block_k = 128;
  blk.scale_a_column_major = true;
  EXPECT_EQ(select_gemm(blk).reason, "cublaslt: cuBLASLt's block modes are 1x128 x 128x128 only");
  blk.block_n = 128;
  blk.scale_a_column_major = false;
  EXPECT_EQ(select_gemm(blk).reason, "cublaslt: block activation scales must be [K/128, M] with M contiguous");
  blk.scale_a_column_major = true;
  blk.n = 320;
  EXPECT_EQ(select_gemm(blk).reason, "cublaslt: N is not a multiple of 128 (block mode)");
  blk.n = 256;
  blk.k = 256;
  EXPECT_EQ(select_gemm(blk).reason, "cublaslt: K/128 is not a multiple of 4 (block mode: weight scale rows of 16 bytes)");
  blk.k = 512;
  blk.arch = 89;
  EXPECT_EQ(select_gemm(blk).backend, GemmBackend::kFallback);
  GemmDesc misaligned = aligned(16, 256, 256);
  misaligned.pointers_16b_aligned = false;
  EXPECT_EQ(select_gemm(misaligned).backend, GemmBackend::kFallback);
}

TEST(GemmConfig, ForcedBackends) {
  setenv("FP8KIT_GEMM_BACKEND", "fallback", 1);
  EXPECT_EQ(select_gemm(aligned(16, 256, 256)).backend, GemmBackend::kFallback);
  setenv("FP8KIT_GEMM_BACKEND", "cublaslt", 1);
  EXPECT_EQ(select_gemm(aligned(16, 256, 256)).backend, GemmBackend::kCublasLt);
  EXPECT_THROW(select_gemm(aligned(3, 129, 127)), Error);
  unsetenv("FP8KIT_GEMM_BACKEND");
}

TEST(GemmConfig, DescribeReadsTheArgs) {
  ScaledMmArgs a;
  a.m = 4;
  a.n = 8;
  a.k = 256;
  a.lda = 256;
  a.ldb = 256;
  a.ldc = 8;
  a.scale_a_kind = a.scale_b_kind = ScaleKind::kBlock;
  a.sa_row_stride = 1;
  a.sa_group_stride = 4;
  alignas(16) static uint8_t buffer[64];
  a.a = a.b = buffer;
  a.out = buffer;
  const GemmDesc d = describe(a, 90);
  EXPECT_TRUE(d.scale_a_column_major);
  EXPECT_TRUE(d.pointers_16b_aligned);
  EXPECT_EQ(d.block_k, 128);
  a.sa_group_stride = 8;  // padded (TMA-aligned) columns: compacted before cuBLASLt
  EXPECT_TRUE(describe(a, 90).scale_a_column_major);
  a.sa_row_stride = 2;  // row-major
  a.sa_group_stride = 1;
  EXPECT_FALSE(describe(a, 90).scale_a_column_major);
}

}  // namespace
}  // namespace fp8kit::ops
