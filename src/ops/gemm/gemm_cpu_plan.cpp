// plan_cpu_gemm (gemm_cpu_plan.h). The cost model is napkin math on this project's 2-core
// AVX2 machine: a thread hand-off costs a few microseconds, so problems under ~2^17
// multiply-adds run on one thread; panel tasks are small enough that two threads balance.
#include "ops/gemm/gemm_cpu_plan.h"

#include <algorithm>

namespace fp8kit::ops::cpu {
namespace {

constexpr int64_t kPanelRows = 192;   // A rows of a panel task (its decoded B panel is reused by all)
constexpr int64_t kPanelCols = 64;    // B rows of a panel task (a 64 x 512 f32 panel: 128 KiB, in L2)
constexpr int64_t kSerialWork = int64_t(1) << 17;  // multiply-adds below which one thread is faster

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

GemmPlan plan_cpu_gemm(const GemmDesc& d, const Overrides& overrides) {
  GemmPlan plan;
  if (overrides.cpu_backend == CpuBackend::kReference) {
    plan.reason = "FP8KIT_CPU_BACKEND=reference";
    return plan;
  }
  if (!d.operands_supported) {
    plan.reason = "an operand format the fast engine does not decode";
    return plan;
  }
  // Chunk boundaries must fall on 8-element vectors of every family.
  if (d.blockwise && (d.block_k <= 0 || d.block_k % 8 != 0)) {
    plan.reason = "block_k is not a multiple of 8";
    return plan;
  }
  // The bf16 family: operands bf16 holds exactly, chunks of whole 32-element steps.
  auto bf16_exact = [](Operand t) { return t == Operand::kE4M3 || t == Operand::kBF16; };
  if (d.isa >= CpuIsa::kAvx512Bf16 && bf16_exact(d.a_type) && bf16_exact(d.b_type) &&
      (!d.blockwise || d.block_k % 32 == 0)) {
    plan.kernel = GemmKernel::kAvx512Bf16;
  } else {
    plan.kernel = d.isa >= CpuIsa::kAvx2 ? GemmKernel::kAvx2 : GemmKernel::kPortable;
  }
  plan.shape = d.m <= kGemvMaxRows ? GemmShape::kGemv : GemmShape::kPanel;
  int64_t tasks;
  if (plan.shape == GemmShape::kGemv) {
    tasks = ceil_div(d.n, 8);  // row groups of at most 8 weight rows
  } else {
    plan.panel_m = std::min(kPanelRows, d.m);
    plan.panel_n = kPanelCols;
    tasks = ceil_div(d.m, plan.panel_m) * ceil_div(d.n, plan.panel_n);
  }
  const int64_t work = d.m * d.n * d.k;
  const int64_t threads = work < kSerialWork ? 1 : std::min<int64_t>(std::max(d.max_threads, 1), tasks);
  plan.threads = int(std::max<int64_t>(threads, 1));
  return plan;
}

std::string_view gemm_kernel_name(GemmKernel kernel) {
  switch (kernel) {
    case GemmKernel::kReference: return "reference";
    case GemmKernel::kPortable: return "portable";
    case GemmKernel::kAvx2: return "avx2";
    case GemmKernel::kAvx512Bf16: return "avx512-bf16";
  }
  return "?";
}

}  // namespace fp8kit::ops::cpu
