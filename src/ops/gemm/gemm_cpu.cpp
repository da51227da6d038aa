// scaled_mm on the CPU (gemm_cpu.h): ScaledMmArgs as an engine problem, with the reference's
// epilogue: one scale per operand row -> fmaf(sa, sb * acc, bias); block scales -> per K block
// acc += (partial * sa) * sb, then acc + bias. Tested by tests/cpu/test_gemm_cpu.cpp.
#include "ops/gemm/gemm_cpu.h"

#include "core/cpu_features.h"
#include "core/parallel.h"
#include "ops/gemm/gemm_cpu_families.h"
#include "ops/gemm/gemm_ref.h"

namespace fp8kit::ops {
namespace cpu {

GemmDesc describe(const GemmProblem& p, int num_threads) {
  GemmDesc d;
  d.m = p.m;
  d.n = p.n;
  d.k = p.k;
  d.a_type = p.a_type;
  d.b_type = p.b_type;
  d.blockwise = p.combine != Combine::kSum;
  d.block_k = p.block_k;
  d.isa = best_cpu_isa();
  d.max_threads = num_threads;
  return d;
}

GemmProblem scaled_mm_problem(const ScaledMmArgs& args) {
  GemmProblem p;
  p.m = args.m;
  p.n = args.n;
  p.k = args.k;
  p.a = args.a;
  p.a_type = Operand::kE4M3;
  p.lda = args.lda;
  p.b = args.b;
  p.b_type = Operand::kE4M3;
  p.ldb = args.ldb;
  if (args.scale_a_kind == ScaleKind::kBlock) {
    p.combine = Combine::kScaledMmBlock;
    p.block_n = args.block_n;
    p.block_k = args.block_k;
    p.block_sa = args.scale_a;
    p.block_sa_row = args.sa_row_stride;
    p.block_sa_chunk = args.sa_group_stride;
    p.block_sb = args.scale_b;
    p.block_sb_row = args.sb_row_stride;
    p.block_sb_chunk = args.sb_group_stride;
    p.final = Final::kScale;  // acc + bias
  } else {
    p.final = Final::kScaledMm;
    p.row_scale = args.scale_a;
    p.row_scale_stride = args.scale_a_kind == ScaleKind::kRow ? 1 : 0;
    p.col_scale = args.scale_b;
    p.col_scale_stride = args.scale_b_kind == ScaleKind::kRow ? 1 : 0;
  }
  p.bias = args.bias;
  p.out = args.out;
  p.out_dtype = args.out_dtype;
  p.ldc = args.ldc;
  return p;
}

}  // namespace cpu

void scaled_mm_cpu(const ScaledMmArgs& args, const Overrides& overrides, int num_threads) {
  const cpu::GemmProblem problem = cpu::scaled_mm_problem(args);
  const cpu::GemmPlan plan = cpu::plan_cpu_gemm(cpu::describe(problem, num_threads), overrides);
  if (plan.kernel == cpu::GemmKernel::kReference) return scaled_mm_ref(args);
  cpu::run_cpu_gemm(problem, plan);
}

}  // namespace fp8kit::ops
