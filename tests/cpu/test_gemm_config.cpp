// GemmDesc -> GemmConfig: which backend serves which scaled_mm problem, and why not the others.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

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

TEST(GemmConfig, DecodeServesPerRowAndSmallBlockProblems) {
  for (int64_t m : {1, 7, 16, 33, 64}) {
    GemmDesc d = aligned(m, 6144, 4096);
    EXPECT_EQ(decode_rejects(d), "") << m;
    // Per-tensor scales stay on cuBLASLt at every M.
    EXPECT_EQ(plan_scaled_mm(d, {}).backend, GemmBackend::kCublasLt) << m;
    // Per-row scales (either operand) up to 32 rows.
    for (const auto& [sa, sb] : std::vector<std::pair<ScaleKind, ScaleKind>>{
             {ScaleKind::kRow, ScaleKind::kRow}, {ScaleKind::kRow, ScaleKind::kTensor}, {ScaleKind::kTensor, ScaleKind::kRow}}) {
      d.scale_a = sa;
      d.scale_b = sb;
      EXPECT_EQ(plan_scaled_mm(d, {}).backend, m <= 32 ? GemmBackend::kDecode : GemmBackend::kCublasLt) << m;
    }
    // Block scales below 16 rows.
    d.scale_a = d.scale_b = ScaleKind::kBlock;
    d.block_n = d.block_k = 128;
    d.scale_a_column_major = true;
    EXPECT_EQ(plan_scaled_mm(d, {}).backend, m < 16 ? GemmBackend::kDecode : GemmBackend::kCublasLt) << m;
  }
  // Block scaling that cuBLASLt declines: the decode kernel up to 64 rows, the wgmma kernel above,
  // the generic kernel before sm_90.
  GemmDesc blk = aligned(16, 320, 256);
  blk.scale_a = blk.scale_b = ScaleKind::kBlock;
  blk.block_n = 128;
  blk.block_k = 128;
  EXPECT_EQ(decode_rejects(blk), "");
  EXPECT_EQ(plan_scaled_mm(blk, {}).backend, GemmBackend::kDecode);
  blk.m = 65;
  EXPECT_EQ(plan_scaled_mm(blk, {}).backend, GemmBackend::kWgmma);
  blk.arch = 89;
  EXPECT_EQ(plan_scaled_mm(blk, {}).backend, GemmBackend::kFallback);
}

TEST(GemmConfig, DecodeRejectsWithAReason) {
  EXPECT_EQ(decode_rejects(aligned(16, 256, 256)), "");
  EXPECT_EQ(decode_rejects(aligned(16, 256, 256, 89)), "the decode kernel runs wgmma (sm_90, built for sm_90a)");
  EXPECT_EQ(decode_rejects(aligned(65, 256, 256)), "M > 64 (a weight stream pays off for decode sizes only)");
  // A ragged K is zero-filled by the TMA; the rows must still start 16 bytes apart.
  GemmDesc ragged = aligned(16, 256, 264);
  ragged.lda = ragged.ldb = 272;
  EXPECT_EQ(decode_rejects(ragged), "");
  GemmDesc stride = aligned(16, 256, 256);
  stride.ldb = 264;
  EXPECT_EQ(decode_rejects(stride), "a row stride is not a multiple of 16 bytes");
  GemmDesc misaligned = aligned(16, 256, 256);
  misaligned.pointers_16b_aligned = false;
  EXPECT_EQ(decode_rejects(misaligned), "an operand is not 16-byte aligned");
  GemmDesc blk = aligned(16, 256, 512);
  blk.scale_a = blk.scale_b = ScaleKind::kBlock;
  blk.block_n = 128;
  blk.block_k = 64;
  EXPECT_EQ(decode_rejects(blk), "block_k is not 128");
}

TEST(GemmConfig, CublasLtServesAlignedProblemsAboveDecodeSizes) {
  for (ScaleKind a : {ScaleKind::kTensor, ScaleKind::kRow}) {
    for (ScaleKind b : {ScaleKind::kTensor, ScaleKind::kRow}) {
      GemmDesc d = aligned(65, 6144, 4096);
      d.scale_a = a;
      d.scale_b = b;
      const GemmConfig c = plan_scaled_mm(d, {});
      EXPECT_EQ(c.backend, GemmBackend::kCublasLt);
      EXPECT_EQ(c.reason, "");
      d.m = 16;
      EXPECT_EQ(cublaslt_rejects(d), "");
    }
  }
  GemmDesc blk = aligned(2048, 7168, 18432);
  blk.scale_a = blk.scale_b = ScaleKind::kBlock;
  blk.block_n = blk.block_k = 128;
  blk.scale_a_column_major = true;
  EXPECT_EQ(plan_scaled_mm(blk, {}).backend, GemmBackend::kCublasLt);
}

TEST(GemmConfig, CublasLtRejectsWithAReason) {
  EXPECT_EQ(cublaslt_rejects(aligned(3, 129, 127)), "K is not a multiple of 16");
  EXPECT_EQ(cublaslt_rejects(aligned(3, 129, 128)), "the output row stride is not a multiple of 16 bytes");
  EXPECT_EQ(cublaslt_rejects(aligned(16, 256, 256, 80)), "no FP8 tensor cores before sm_89");
  GemmDesc blk = aligned(16, 256, 512);
  blk.scale_a = blk.scale_b = ScaleKind::kBlock;
  blk.block_n = 64;
  blk.block_k = 128;
  blk.scale_a_column_major = true;
  EXPECT_EQ(cublaslt_rejects(blk), "cuBLASLt's block modes are 1x128 x 128x128 only");
  blk.block_n = 128;
  blk.scale_a_column_major = false;
  EXPECT_EQ(cublaslt_rejects(blk), "block activation scales must be [K/128, M] with M contiguous");
  blk.scale_a_column_major = true;
  blk.n = 320;
  EXPECT_EQ(cublaslt_rejects(blk), "N is not a multiple of 128 (block mode)");
  blk.n = 256;
  blk.k = 256;
  EXPECT_EQ(cublaslt_rejects(blk), "K/128 is not a multiple of 4 (block mode: weight scale rows of 16 bytes)");
  blk.k = 512;
  blk.arch = 89;
  EXPECT_EQ(cublaslt_rejects(blk), "cuBLASLt's 128x128 block modes are used on sm_90 only");
}

TEST(GemmConfig, WhatCublasLtRejectsGoesToWgmmaOnSm90ElseToTheGenericKernel) {
  EXPECT_EQ(plan_scaled_mm(aligned(3, 129, 127), {}).reason,
            "cublaslt: K is not a multiple of 16; wgmma: a row stride is not a multiple of 16 bytes");
  EXPECT_EQ(plan_scaled_mm(aligned(16, 256, 256, 80), {}).reason,
            "cublaslt: no FP8 tensor cores before sm_89; wgmma: wgmma needs sm_90 (built for sm_90a)");
  GemmDesc odd_n = aligned(65, 129, 128);
  EXPECT_EQ(plan_scaled_mm(odd_n, {}).backend, GemmBackend::kWgmma);
  EXPECT_EQ(plan_scaled_mm(odd_n, {}).reason, "cublaslt: the output row stride is not a multiple of 16 bytes");
  odd_n.arch = 89;
  EXPECT_EQ(plan_scaled_mm(odd_n, {}).backend, GemmBackend::kFallback);
  // DeepSeek-V3's fused q_a / kv_a projection: N = 2112 is not a multiple of 128.
  GemmDesc blk = aligned(2048, 2112, 7168);
  blk.scale_a = blk.scale_b = ScaleKind::kBlock;
  blk.block_n = blk.block_k = 128;
  blk.scale_a_column_major = true;
  EXPECT_EQ(plan_scaled_mm(blk, {}).backend, GemmBackend::kWgmma);
  blk.n = 2048;
  EXPECT_EQ(plan_scaled_mm(blk, {}).backend, GemmBackend::kCublasLt);
  blk.scale_a_column_major = false;  // row-major activation scales: cuBLASLt cannot read them
  EXPECT_EQ(plan_scaled_mm(blk, {}).backend, GemmBackend::kWgmma);
  blk.arch = 89;
  EXPECT_EQ(plan_scaled_mm(blk, {}).backend, GemmBackend::kFallback);
  GemmDesc misaligned = aligned(16, 256, 256);
  misaligned.pointers_16b_aligned = false;
  EXPECT_EQ(plan_scaled_mm(misaligned, {}).backend, GemmBackend::kFallback);
}

TEST(GemmConfig, ForcedBackends) {
  Overrides forced;
  forced.gemm_backend = GemmBackendOverride::kFallback;
  EXPECT_EQ(plan_scaled_mm(aligned(16, 256, 256), forced).backend, GemmBackend::kFallback);
  forced.gemm_backend = GemmBackendOverride::kCublasLt;
  EXPECT_EQ(plan_scaled_mm(aligned(16, 256, 256), forced).backend, GemmBackend::kCublasLt);
  EXPECT_THROW(plan_scaled_mm(aligned(3, 129, 127), forced), Error);
  forced.gemm_backend = GemmBackendOverride::kDecode;
  EXPECT_EQ(plan_scaled_mm(aligned(16, 256, 256), forced).backend, GemmBackend::kDecode);
  EXPECT_EQ(plan_scaled_mm(aligned(3, 129, 48), forced).backend, GemmBackend::kDecode);
  EXPECT_THROW(plan_scaled_mm(aligned(65, 256, 256), forced), Error);
  EXPECT_THROW(plan_scaled_mm(aligned(3, 129, 127), forced), Error);
  EXPECT_STREQ(gemm_backend_name(GemmBackend::kDecode), "decode");
}

TEST(GemmConfig, WgmmaRejectsWithAReason) {
  EXPECT_EQ(wgmma_rejects(aligned(4096, 6144, 4096)), "");
  EXPECT_EQ(wgmma_rejects(aligned(4096, 6144, 4096, 89)), "wgmma needs sm_90 (built for sm_90a)");
  GemmDesc ragged_k = aligned(200, 257, 4097);
  EXPECT_EQ(wgmma_rejects(ragged_k), "a row stride is not a multiple of 16 bytes");
  ragged_k.lda = ragged_k.ldb = 4112;
  EXPECT_EQ(wgmma_rejects(ragged_k), "");  // K itself may be ragged, and N and the output stride
  GemmDesc misaligned = aligned(256, 256, 256);
  misaligned.pointers_16b_aligned = false;
  EXPECT_EQ(wgmma_rejects(misaligned), "an operand is not 16-byte aligned");
  EXPECT_EQ(wgmma_rejects(aligned(16, 16, 0)), "K is 0");
  GemmDesc blk = aligned(256, 256, 512);
  blk.scale_a = blk.scale_b = ScaleKind::kBlock;
  blk.block_n = blk.block_k = 128;
  EXPECT_EQ(wgmma_rejects(blk), "");  // any activation-scale layout
  blk.block_n = 64;
  EXPECT_EQ(wgmma_rejects(blk), "block scales other than 1x128 x 128x128");
  Overrides forced;
  forced.gemm_backend = GemmBackendOverride::kWgmma;
  EXPECT_EQ(plan_scaled_mm(aligned(16, 256, 256), forced).backend, GemmBackend::kWgmma);
  EXPECT_THROW(plan_scaled_mm(aligned(16, 256, 256, 89), forced), Error);
  EXPECT_STREQ(gemm_backend_name(GemmBackend::kWgmma), "wgmma");
}

TEST(GemmConfig, WgmmaPlanIsAPersistentGridOfTiles) {
  WgmmaGemmPlan p = plan_wgmma_gemm(2048, 6144, 132);
  EXPECT_EQ(p.tiles, 16 * 48);
  EXPECT_EQ(p.ctas, 132);
  p = plan_wgmma_gemm(129, 200, 132);  // ragged: 2 x 2 tiles, no idle CTA
  EXPECT_EQ(p.tiles, 4);
  EXPECT_EQ(p.ctas, 4);
}

TEST(GemmConfig, DecodePlanCoversKWithNoEmptySplit) {
  for (int sms : {1, 78, 132}) {
    for (int64_t m : {1, 9, 16, 33, 64}) {
      for (const auto& [n, k] : std::vector<std::pair<int64_t, int64_t>>{
               {6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}, {8192, 8192}, {57344, 8192}, {8192, 28672},
               {24576, 7168}, {7168, 18432}, {2112, 7168}, {7168, 2048}, {1, 16}, {129, 48}, {200, 7168}, {320, 4128}}) {
        const DecodeGemmPlan p = plan_decode_gemm(m, n, k, sms);
        const std::string what = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + " on " +
                                 std::to_string(sms);
        EXPECT_EQ(p.token_tile, m <= 8 ? 8 : m <= 16 ? 16 : m <= 32 ? 32 : 64) << what;
        EXPECT_EQ(p.n_tiles, (n + kDecodeTileN - 1) / kDecodeTileN) << what;
        EXPECT_EQ(p.chunks, (k + kDecodeChunkK - 1) / kDecodeChunkK) << what;
        EXPECT_GE(p.splits, 1) << what;
        EXPECT_GE(p.chunks_per_split, 1) << what;
        EXPECT_GE(p.splits * p.chunks_per_split, p.chunks) << what;       // every chunk covered
        EXPECT_LT((p.splits - 1) * p.chunks_per_split, p.chunks) << what;  // the last split is not empty
        EXPECT_EQ(p.ctas, std::min<int64_t>(p.n_tiles * p.splits, int64_t(kDecodeCtasPerSm) * sms)) << what;
      }
    }
  }
}

TEST(GemmConfig, DecodePlanSplitsKOnlyWhenTooFewTilesStream) {
  // Enough tiles to pull the memory's bandwidth: no split, no workspace, the epilogue in the main
  // kernel; the persistent grid is at most two CTAs a multiprocessor.
  for (const auto& [n, k] : std::vector<std::pair<int64_t, int64_t>>{
           {57344, 8192}, {28672, 4096}, {6144, 4096}, {7168, 18432}, {8192, 28672}, {7168, 2048}}) {
    const DecodeGemmPlan p = plan_decode_gemm(16, n, k, 132);
    EXPECT_EQ(p.splits, 1) << n << "x" << k;
    EXPECT_EQ(p.ctas, std::min<int64_t>(p.n_tiles, 264)) << n << "x" << k;
  }
  // One chunk of K cannot be split.
  EXPECT_EQ(plan_decode_gemm(16, 256, 32, 132).splits, 1);
  // 64 tiles over 112 K tiles: one CTA each would stream for longer than the memory takes.
  EXPECT_EQ(plan_decode_gemm(1, 4096, 14336, 132).splits, 2);
  // 33 tiles of a 2112 x 7168 weight over 56 K tiles: three splits.
  const DecodeGemmPlan small_n = plan_decode_gemm(16, 2112, 7168, 132);
  EXPECT_EQ(small_n.n_tiles, 33);
  EXPECT_EQ(small_n.splits, 3);
  EXPECT_EQ(small_n.chunks_per_split, 19);
  EXPECT_EQ(small_n.ctas, 99);
  // Splits grow as N shrinks.
  EXPECT_GT(plan_decode_gemm(16, 4096, 4096, 132).splits, plan_decode_gemm(16, 8192, 4096, 132).splits);
}

TEST(GemmConfig, DecodePlanTakesForcedSplits) {
  const DecodeGemmPlan p = plan_decode_gemm(16, 6144, 4096, 132, 3);  // 32 K tiles: 11, 11, 10
  EXPECT_EQ(p.splits, 3);
  EXPECT_EQ(p.chunks_per_split, 11);
  EXPECT_EQ(p.ctas, 264);
  // More splits than K tiles: one K tile each, none empty.
  const DecodeGemmPlan q = plan_decode_gemm(1, 256, 384, 132, 64);
  EXPECT_EQ(q.splits, 3);
  EXPECT_EQ(q.chunks_per_split, 1);
  // 0: the cost model's choice (the value range is Overrides::parse's: tests/cpu/test_overrides.cpp).
  EXPECT_EQ(plan_decode_gemm(16, 6144, 4096, 132, 0).splits, plan_decode_gemm(16, 6144, 4096, 132).splits);
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

namespace fp8kit::ops {
namespace {

TEST(GemmConfig, WeightOnlyTiledPlanCoversKWithNoEmptySplit) {
  for (int sms : {1, 78, 108, 132}) {
    for (int64_t m : {1, 64, 65, 128, 512, 4096}) {
      for (const auto& [n, k] : std::vector<std::pair<int64_t, int64_t>>{
               {4096, 4096}, {2112, 7168}, {57344, 8192}, {4096, 14336}, {129, 48}, {1, 16}, {300, 4128}}) {
        const WeightOnlyTiledPlan p = plan_weight_only_tiled(m, n, k, sms);
        const std::string what = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + " on " +
                                 std::to_string(sms);
        EXPECT_EQ(p.tiles, ((m + 127) / 128) * ((n + 127) / 128)) << what;
        EXPECT_EQ(p.k_tiles, (k + 31) / 32) << what;
        EXPECT_GE(p.splits, 1) << what;
        EXPECT_GE(p.splits * p.k_tiles_per_split, p.k_tiles) << what;       // every K tile covered
        EXPECT_LT((p.splits - 1) * p.k_tiles_per_split, p.k_tiles) << what;  // the last split is not empty
        if (p.splits > 1) {
          EXPECT_LT(p.tiles, sms) << what;  // only when the tiles leave multiprocessors idle
          EXPECT_GE(p.k_tiles_per_split, kWeightOnlyMinKTilesPerSplit) << what;
          EXPECT_LE(p.tiles * p.splits, int64_t(sms) * kWeightOnlyCtasPerSm + p.tiles) << what;
        }
      }
    }
  }
}

TEST(GemmConfig, WeightOnlyTiledPlanSplitsToAboutTwoCtasPerSm) {
  // 32 tiles of a 4096 x 4096 weight at M = 128 on 132 SMs: 9 splits of 15 K tiles (288 CTAs).
  const WeightOnlyTiledPlan p = plan_weight_only_tiled(128, 4096, 4096, 132);
  EXPECT_EQ(p.tiles, 32);
  EXPECT_EQ(p.splits, 9);
  EXPECT_EQ(p.k_tiles_per_split, 15);
  // Enough tiles: no split. Short K: at most K / 256 splits.
  EXPECT_EQ(plan_weight_only_tiled(2048, 4096, 4096, 132).splits, 1);
  EXPECT_EQ(plan_weight_only_tiled(128, 4096, 512, 132).splits, 2);
  EXPECT_EQ(plan_weight_only_tiled(128, 4096, 128, 132).splits, 1);
}

TEST(GemmConfig, WeightOnlyPlanByRowsAndWhatServes) {
  auto plan = [](int64_t m, bool tiled, bool mma, bool decode, WeightOnlyGemmOverride forced) {
    Overrides o;
    o.weight_only_gemm = forced;
    return plan_weight_only_mm({m, tiled, mma, decode}, o);
  };
  constexpr auto kAuto = WeightOnlyGemmOverride::kAuto;
  EXPECT_EQ(plan(33, true, true, false, kAuto), WeightOnlyKernel::kTiled);  // from 33 rows
  EXPECT_EQ(plan(32, true, true, false, kAuto), WeightOnlyKernel::kMma);
  EXPECT_EQ(plan(2, true, true, true, kAuto), WeightOnlyKernel::kMma);      // tensor cores from 2 rows
  EXPECT_EQ(plan(1, true, true, true, kAuto), WeightOnlyKernel::kDecode);   // one row streams on CUDA cores
  EXPECT_EQ(plan(1, true, true, false, kAuto), WeightOnlyKernel::kMma);
  EXPECT_EQ(plan(64, false, false, false, kAuto), WeightOnlyKernel::kGeneric);
  EXPECT_EQ(plan(4, true, true, false, WeightOnlyGemmOverride::kTiled), WeightOnlyKernel::kTiled);
  EXPECT_EQ(plan(4, false, true, false, WeightOnlyGemmOverride::kTiled), WeightOnlyKernel::kMma);
  EXPECT_EQ(plan(64, true, true, true, WeightOnlyGemmOverride::kCudaCore), WeightOnlyKernel::kDecode);
  EXPECT_EQ(plan(64, true, true, false, WeightOnlyGemmOverride::kCudaCore), WeightOnlyKernel::kGeneric);
}

}  // namespace
}  // namespace fp8kit::ops
