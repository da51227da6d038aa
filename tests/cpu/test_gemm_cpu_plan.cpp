// plan_cpu_gemm (src/ops/gemm/gemm_cpu_plan.cpp) and the CPU feature detection it takes: which
// implementation serves which problem, the shapes, the thread counts, and the kernel family for
// each instruction set.
#include <gtest/gtest.h>

#include "core/cpu_features.h"
#include "ops/gemm/gemm_cpu_plan.h"

namespace fp8kit {
namespace {

using namespace ops::cpu;

GemmDesc desc(int64_t m, int64_t n, int64_t k, CpuIsa isa = CpuIsa::kAvx2, int threads = 2) {
  GemmDesc d;
  d.m = m;
  d.n = n;
  d.k = k;
  d.isa = isa;
  d.max_threads = threads;
  return d;
}

TEST(GemmCpuPlan, FamilyFollowsTheInstructionSet) {
  EXPECT_EQ(plan_cpu_gemm(desc(1, 4096, 4096, CpuIsa::kAvx2), {}).kernel, GemmKernel::kAvx2);
  EXPECT_EQ(plan_cpu_gemm(desc(1, 4096, 4096, CpuIsa::kPortable), {}).kernel, GemmKernel::kPortable);
  Overrides fast;
  fast.cpu_backend = CpuBackend::kFast;
  EXPECT_EQ(plan_cpu_gemm(desc(64, 576, 576, CpuIsa::kPortable), fast).kernel, GemmKernel::kPortable);
}

// The bf16 family where bf16 holds every operand exactly and chunks are whole 32-element steps.
TEST(GemmCpuPlan, Avx512Bf16ForE4m3AndBf16Operands) {
  GemmDesc d = desc(1, 4096, 4096, CpuIsa::kAvx512Bf16);
  EXPECT_EQ(plan_cpu_gemm(d, {}).kernel, GemmKernel::kAvx512Bf16);  // W8A8
  d.a_type = Operand::kBF16;
  EXPECT_EQ(plan_cpu_gemm(d, {}).kernel, GemmKernel::kAvx512Bf16);  // W8A16 bf16
  d.b_type = Operand::kBF16;
  EXPECT_EQ(plan_cpu_gemm(d, {}).kernel, GemmKernel::kAvx512Bf16);  // BF16
  d.a_type = d.b_type = Operand::kF16;
  EXPECT_EQ(plan_cpu_gemm(d, {}).kernel, GemmKernel::kAvx2);  // f16 does not fit bf16
  d.a_type = Operand::kF16;
  d.b_type = Operand::kE4M3;
  EXPECT_EQ(plan_cpu_gemm(d, {}).kernel, GemmKernel::kAvx2);
  GemmDesc block = desc(64, 512, 512, CpuIsa::kAvx512Bf16);
  block.blockwise = true;
  block.block_k = 128;
  EXPECT_EQ(plan_cpu_gemm(block, {}).kernel, GemmKernel::kAvx512Bf16);
  block.block_k = 16;
  EXPECT_EQ(plan_cpu_gemm(block, {}).kernel, GemmKernel::kAvx2);
  EXPECT_EQ(plan_cpu_gemm(desc(1, 4096, 4096, CpuIsa::kAvx2), {}).kernel, GemmKernel::kAvx2);
}

TEST(GemmCpuPlan, ReferenceWhenAskedOrWhenTheEngineCannotServe) {
  Overrides reference;
  reference.cpu_backend = CpuBackend::kReference;
  GemmPlan p = plan_cpu_gemm(desc(1, 64, 64), reference);
  EXPECT_EQ(p.kernel, GemmKernel::kReference);
  EXPECT_EQ(p.reason, "FP8KIT_CPU_BACKEND=reference");
  GemmDesc fnuz = desc(1, 64, 64);
  fnuz.operands_supported = false;
  EXPECT_EQ(plan_cpu_gemm(fnuz, {}).kernel, GemmKernel::kReference);
  GemmDesc odd_block = desc(4, 64, 96);
  odd_block.blockwise = true;
  odd_block.block_k = 12;  // chunk boundaries inside an 8-lane vector
  EXPECT_EQ(plan_cpu_gemm(odd_block, {}).reason, "block_k is not a multiple of 8");
  odd_block.block_k = 16;
  EXPECT_EQ(plan_cpu_gemm(odd_block, {}).kernel, GemmKernel::kAvx2);
}

TEST(GemmCpuPlan, GemvUpToEightRowsThenPanels) {
  for (int64_t m = 1; m <= 8; ++m) EXPECT_EQ(plan_cpu_gemm(desc(m, 4096, 4096), {}).shape, GemmShape::kGemv) << m;
  const GemmPlan p9 = plan_cpu_gemm(desc(9, 4096, 4096), {});
  EXPECT_EQ(p9.shape, GemmShape::kPanel);
  EXPECT_EQ(p9.panel_m, 9);
  const GemmPlan p512 = plan_cpu_gemm(desc(512, 4096, 4096), {});
  EXPECT_EQ(p512.panel_m, 192);
  EXPECT_EQ(p512.panel_n, 64);
}

TEST(GemmCpuPlan, ThreadsFromTheContextAndTheWork) {
  EXPECT_EQ(plan_cpu_gemm(desc(1, 4096, 4096, CpuIsa::kAvx2, 2), {}).threads, 2);
  EXPECT_EQ(plan_cpu_gemm(desc(1, 4096, 4096, CpuIsa::kAvx2, 1), {}).threads, 1);
  EXPECT_EQ(plan_cpu_gemm(desc(1, 64, 64, CpuIsa::kAvx2, 2), {}).threads, 1);  // 4 Ki multiply-adds: one thread
  EXPECT_EQ(plan_cpu_gemm(desc(8, 16, 65536, CpuIsa::kAvx2, 16), {}).threads, 2);  // no more threads than row groups
  EXPECT_EQ(plan_cpu_gemm(desc(64, 64, 4096, CpuIsa::kAvx2, 16), {}).threads, 1);  // one panel task
}

TEST(CpuFeatures, BestIsaNeedsAvx2FmaAndF16c) {
  CpuFeatures f;
  EXPECT_EQ(best_cpu_isa(f), CpuIsa::kPortable);
  f.avx2 = f.fma = true;
  EXPECT_EQ(best_cpu_isa(f), CpuIsa::kPortable);
  f.f16c = true;
  EXPECT_EQ(best_cpu_isa(f), CpuIsa::kAvx2);
  f.avx512f = f.avx512bw = f.avx512vl = f.avx512_bf16 = true;
  EXPECT_EQ(best_cpu_isa(f), CpuIsa::kAvx2);  // VBMI (the byte tables) missing
  f.avx512vbmi = true;
  EXPECT_EQ(best_cpu_isa(f), CpuIsa::kAvx512Bf16);
  EXPECT_EQ(cpu_isa_name(CpuIsa::kAvx2), "avx2");
  // This machine: the detection agrees with itself and never reports AVX-512 without AVX2.
  const CpuFeatures& here = cpu_features();
  EXPECT_FALSE(here.avx512f && !here.avx2);
  EXPECT_EQ(best_cpu_isa(), best_cpu_isa(here));
}

}  // namespace
}  // namespace fp8kit
