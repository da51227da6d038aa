// weight_only_mm on the CPU (gemm_cpu.h): 16-bit activations times FP8 weights decoded in
// registers. The dequantization is factored out of the sums: y = (sum x * decode(w)) * s + bias
// per tensor or channel, and per K block t += partial * s[n / bn, kb] with block scales, where
// the reference first rounds every decode(w) * s to f32 (weight_only_ref.cpp): the two differ by
// those roundings only, within the f32-accumulation tolerance, and agree exactly on integer
// grids with power-of-two scales. Tested by tests/cpu/test_gemm_cpu.cpp.
#include "core/parallel.h"
#include "ops/gemm/gemm_cpu.h"
#include "ops/gemm/gemm_cpu_families.h"
#include "ops/gemm/weight_only_ref.h"

namespace fp8kit::ops {
namespace cpu {

GemmProblem weight_only_mm_problem(const WeightOnlyMmArgs& args) {
  GemmProblem p;
  p.m = args.m;
  p.n = args.n;
  p.k = args.k;
  p.a = args.x;
  p.a_type = args.act_dtype == DType::kBF16 ? Operand::kBF16 : Operand::kF16;
  p.lda = args.ldx;
  p.b = args.w;
  p.b_type = Operand::kE4M3;
  p.ldb = args.ldw;
  p.final = Final::kScale;
  switch (args.scale_kind) {
    case ScaleKind::kTensor:
    case ScaleKind::kRow:
      p.col_scale = args.scale;
      p.col_scale_stride = args.scale_kind == ScaleKind::kRow ? 1 : 0;
      break;
    case ScaleKind::kBlock:
      p.combine = Combine::kWeightBlock;
      p.block_n = args.block_n;
      p.block_k = args.block_k;
      p.block_sb = args.scale;
      p.block_sb_row = args.s_row_stride;
      p.block_sb_chunk = args.s_col_stride;
      break;
  }
  p.bias = args.bias;
  p.out = args.out;
  p.out_dtype = args.act_dtype;
  p.ldc = args.ldc;
  return p;
}

}  // namespace cpu

void weight_only_mm_cpu(const WeightOnlyMmArgs& args, const Overrides& overrides, int num_threads) {
  const cpu::GemmProblem problem = cpu::weight_only_mm_problem(args);
  const cpu::GemmPlan plan = cpu::plan_cpu_gemm(cpu::describe(problem, num_threads), overrides);
  if (plan.kernel == cpu::GemmKernel::kReference) return weight_only_mm_ref(args);
  cpu::run_cpu_gemm(problem, plan);
}

}  // namespace fp8kit::ops
