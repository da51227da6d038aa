// expert_gemms_cpu (fused_experts_gemm_cpu.h). Tested through tests/cpu/test_fused_experts*.cpp.
#include "ops/moe/fused_experts_gemm_cpu.h"

#include <cstring>
#include <vector>

#include "core/check.h"
#include "ops/gemm/gemm_cpu.h"
#include "ops/gemm/gemm_cpu_families.h"

namespace fp8kit::ops {
namespace {

cpu::Operand operand(DType dtype) {
  switch (dtype) {
    case DType::kE4M3FN: return cpu::Operand::kE4M3;
    case DType::kBF16: return cpu::Operand::kBF16;
    case DType::kF16: return cpu::Operand::kF16;
    case DType::kF32: return cpu::Operand::kF32;
    default: fail(ErrorCode::kInternal, "expert_gemms_cpu: no engine operand for {}", dtype_name(dtype));
  }
}

}  // namespace

void expert_gemms_cpu(const ExpertGemmCpuArgs& g, CpuIsa isa, const Overrides& overrides, int num_threads) {
  const Tensor& w = *g.w;
  const int64_t num_experts = w.size(0), n = w.size(1), k = w.size(2);
  const size_t out_row_bytes = size_t(n) * g.out->element_size();
  // Slots grouped by expert (counting sort, slot order kept within an expert).
  std::vector<int32_t> start(size_t(num_experts + 1), 0), order(size_t(g.num_slots));
  for (int64_t s = 0; s < g.num_slots; ++s) {
    const int32_t e = g.slot_expert[s];
    if (e < 0) {
      std::memset(static_cast<uint8_t*>(g.out->data_ptr()) + size_t(s) * out_row_bytes, 0, out_row_bytes);
    } else {
      ++start[size_t(e) + 1];
    }
  }
  for (int64_t e = 0; e < num_experts; ++e) start[size_t(e + 1)] += start[size_t(e)];
  std::vector<int32_t> fill(start.begin(), start.end() - 1);
  for (int64_t s = 0; s < g.num_slots; ++s) {
    if (g.slot_expert[s] >= 0) order[size_t(fill[size_t(g.slot_expert[s])]++)] = int32_t(s);
  }
  std::vector<int32_t> a_rows(size_t(g.num_slots));
  for (int64_t i = 0; i < g.num_slots; ++i) a_rows[size_t(i)] = int32_t(order[size_t(i)] / g.slots_per_row);

  const int64_t nb = g.block ? (n + g.block_n - 1) / g.block_n : 0, kb = g.block ? (k + g.block_k - 1) / g.block_k : 0;
  const float* ws = g.w_scale != nullptr && g.w_scale->defined() ? g.w_scale->data<float>() : nullptr;
  for (int64_t e = 0; e < num_experts; ++e) {
    const int64_t first = start[size_t(e)], count = start[size_t(e + 1)] - first;
    if (count == 0) continue;
    cpu::GemmProblem p;
    p.m = count;
    p.n = n;
    p.k = k;
    p.a = g.a->data_ptr();
    p.a_type = operand(g.a->dtype());
    p.lda = g.a->stride(0);
    p.a_rows = a_rows.data() + first;
    p.b = static_cast<const uint8_t*>(w.data_ptr()) + size_t(e * w.stride(0)) * w.element_size();
    p.b_type = operand(w.dtype());
    p.ldb = w.stride(1);
    p.final = cpu::Final::kMoe;
    p.row_weight = g.slot_weight;
    if (g.quant == ExpertQuant::kFp8W8A8) {
      if (g.block) {  // acc = fma(dot_kb * a_s[row, kb], b_s[e, n / bn, kb], acc)
        p.combine = cpu::Combine::kMoeBlock;
        p.block_sa = g.a_scale->data<float>();
        p.block_sa_row = kb;
        p.block_sa_chunk = 1;
      } else {  // ((acc * w) * a_scale) * b_scale[e]
        p.moe_sa = g.a_scale->data<float>();
        p.moe_sb = ws + e;
      }
    } else if (g.quant == ExpertQuant::kWeightOnly && !g.block) {
      p.col_scale = ws + e;  // stride 0: one scale for the expert
    } else if (g.quant == ExpertQuant::kWeightOnly) {
      p.combine = cpu::Combine::kWeightBlock;
    }
    if (g.block) {
      p.block_n = g.block_n;
      p.block_k = g.block_k;
      p.block_sb = ws + e * nb * kb;
      p.block_sb_row = kb;
      p.block_sb_chunk = 1;
    }
    p.out = g.out->data_ptr();
    p.out_dtype = g.out->dtype();
    p.ldc = n;
    p.out_rows = order.data() + first;
    cpu::GemmDesc d = cpu::describe(p, num_threads);
    d.isa = isa;
    const cpu::GemmPlan plan = cpu::plan_cpu_gemm(d, overrides);
    FP8KIT_CHECK(plan.kernel != cpu::GemmKernel::kReference, ErrorCode::kInternal,
                 "expert_gemms_cpu: no fast plan for expert {} ({})", e, plan.reason);
    cpu::run_cpu_gemm(p, plan);
  }
}

}  // namespace fp8kit::ops
