// run_cpu_gemm (gemm_cpu_families.h): the dispatch from a plan to its kernel family.
#include "core/check.h"
#include "core/cpu_features.h"
#include "ops/gemm/gemm_cpu_families.h"

namespace fp8kit::ops::cpu {

void run_cpu_gemm(const GemmProblem& problem, const GemmPlan& plan) {
  FP8KIT_CHECK(plan.shape == GemmShape::kPanel || problem.m <= kGemvMaxRows, ErrorCode::kInternal,
               "run_cpu_gemm: a GEMV plan for {} rows", problem.m);
  switch (plan.kernel) {
    case GemmKernel::kPortable: return run_gemm_portable(problem, plan);
    case GemmKernel::kAvx2:
      FP8KIT_CHECK(best_cpu_isa() >= CpuIsa::kAvx2, ErrorCode::kInternal,
                   "run_cpu_gemm: an AVX2 plan on a CPU without AVX2, FMA and F16C");
      return run_gemm_avx2(problem, plan);
    case GemmKernel::kAvx512Bf16: {
      auto bf16_exact = [](Operand t) { return t == Operand::kE4M3 || t == Operand::kBF16; };
      FP8KIT_CHECK(best_cpu_isa() >= CpuIsa::kAvx512Bf16 && bf16_exact(problem.a_type) && bf16_exact(problem.b_type) &&
                       problem.chunk() % 32 == 0,
                   ErrorCode::kInternal, "run_cpu_gemm: an AVX-512-BF16 plan it cannot run");
      return run_gemm_avx512_bf16(problem, plan);
    }
    case GemmKernel::kReference: break;
  }
  fail(ErrorCode::kInternal, "run_cpu_gemm: the reference runs on the op's own arguments");
}

}  // namespace fp8kit::ops::cpu
