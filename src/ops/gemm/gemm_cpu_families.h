// The kernel families of the CPU GEMM engine, one translation unit per instruction set
// (gemm_cpu_portable.cpp, gemm_cpu_avx2.cpp, gemm_cpu_avx512.cpp), and run_cpu_gemm, which executes a plan with the
// family it names. The family is chosen by plan_cpu_gemm from the CPU features detected once at
// start-up (core/cpu_features.h).
#pragma once

#include "ops/gemm/gemm_cpu_plan.h"
#include "ops/gemm/gemm_cpu_problem.h"

namespace fp8kit::ops::cpu {

void run_gemm_portable(const GemmProblem& problem, const GemmPlan& plan);
// Only called when cpu_features() reports AVX2, FMA and F16C (x86-64 builds).
void run_gemm_avx2(const GemmProblem& problem, const GemmPlan& plan);
// Only called when best_cpu_isa() is kAvx512Bf16, on problems whose operands are e4m3fn or bf16.
void run_gemm_avx512_bf16(const GemmProblem& problem, const GemmPlan& plan);

// Executes a plan of the portable or AVX2 family (kInternal for kReference or a family this
// machine or build cannot run: the reference is called by the op, on its own args).
void run_cpu_gemm(const GemmProblem& problem, const GemmPlan& plan);

}  // namespace fp8kit::ops::cpu
