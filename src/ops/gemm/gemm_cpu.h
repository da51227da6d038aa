// The CPU side of the GEMM ops: scaled_mm_cpu, weight_only_mm_cpu and matmul_16bit_cpu take the
// op's validated args, ask plan_cpu_gemm which implementation serves the problem, and run it: the
// reference (gemm_ref.cpp, ...) or the fast engine (gemm_cpu_families.h). The entry points
// (gemm.cpp, weight_only.cpp, matmul_16bit.cpp) pass their context's overrides and threads. The
// *_problem / *_desc functions are what they plan and run, for tests and benchmarks that force a
// plan. Tested by tests/cpu/test_gemm_cpu.cpp.
#pragma once

#include "fp8kit/runtime/overrides.h"
#include "ops/gemm/gemm_args.h"
#include "ops/gemm/gemm_cpu_plan.h"
#include "ops/gemm/gemm_cpu_problem.h"
#include "ops/gemm/matmul_16bit_args.h"

namespace fp8kit::ops {

void scaled_mm_cpu(const ScaledMmArgs& args, const Overrides& overrides, int num_threads);
void weight_only_mm_cpu(const WeightOnlyMmArgs& args, const Overrides& overrides, int num_threads);
void matmul_16bit_cpu(const Matmul16Args& args, const Overrides& overrides, int num_threads);

namespace cpu {

GemmProblem scaled_mm_problem(const ScaledMmArgs& args);
GemmProblem weight_only_mm_problem(const WeightOnlyMmArgs& args);
GemmProblem matmul_16bit_problem(const Matmul16Args& args);
// The plan's description of a problem on this machine (best_cpu_isa()) with `num_threads`.
GemmDesc describe(const GemmProblem& problem, int num_threads);

}  // namespace cpu
}  // namespace fp8kit::ops
