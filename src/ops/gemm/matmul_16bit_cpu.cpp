// matmul_16bit on the CPU (gemm_cpu.h): bf16/f16/f32 operands widened exactly to f32 and summed
// in f32 (the reference sums in double and rounds once), y = acc + bias. Unquantized layers
// (the BF16 baseline model, lm_head) run here. Tested by tests/cpu/test_gemm_cpu.cpp.
#include "core/parallel.h"
#include "ops/gemm/gemm_cpu.h"
#include "ops/gemm/gemm_cpu_families.h"

namespace fp8kit::ops {
namespace cpu {

GemmProblem matmul_16bit_problem(const Matmul16Args& args) {
  const Operand type = args.dtype == DType::kBF16 ? Operand::kBF16 : args.dtype == DType::kF16 ? Operand::kF16 : Operand::kF32;
  GemmProblem p;
  p.m = args.m;
  p.n = args.n;
  p.k = args.k;
  p.a = args.x;
  p.a_type = type;
  p.lda = args.ldx;
  p.b = args.w;
  p.b_type = type;
  p.ldb = args.ldw;
  p.final = Final::kScale;
  p.bias = args.bias;
  p.out = args.out;
  p.out_dtype = args.dtype;
  p.ldc = args.ldc;
  return p;
}

}  // namespace cpu

void matmul_16bit_cpu(const Matmul16Args& args, const Overrides& overrides, int num_threads) {
  const cpu::GemmProblem problem = cpu::matmul_16bit_problem(args);
  const cpu::GemmPlan plan = cpu::plan_cpu_gemm(cpu::describe(problem, num_threads), overrides);
  if (plan.kernel == cpu::GemmKernel::kReference) return matmul_16bit_ref(args);
  cpu::run_cpu_gemm(problem, plan);
}

}  // namespace fp8kit::ops
