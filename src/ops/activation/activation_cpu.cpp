// act_and_mul on the CPU (activation_cpu.h): rows in parallel through the AVX2 silu row kernel.
#include "ops/activation/activation_cpu.h"

#include "core/check.h"
#include "core/parallel.h"
#include "ops/activation/activation_ref.h"

namespace fp8kit::ops {
namespace cpu {

void run_silu_and_mul(const ActAndMulArgs& a, const ActivationPlan& plan) {
  FP8KIT_CHECK(plan.kernel == ActivationKernel::kAvx2Silu && best_cpu_isa() >= CpuIsa::kAvx2, ErrorCode::kInternal,
               "run_silu_and_mul: an AVX2 plan needs an AVX2 CPU");
  const size_t es = dtype_size(a.dtype);
  const int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(a.d, 1));
  parallel_for_at_most(plan.threads, a.rows, grain, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      silu_and_mul_row_avx2(static_cast<const uint8_t*>(a.x) + size_t(r * a.ldx) * es,
                            static_cast<uint8_t*>(a.out) + size_t(r * a.ldo) * es, a.d, a.dtype);
    }
  });
}

}  // namespace cpu

void act_and_mul_cpu(const ActAndMulArgs& args, const Overrides& overrides, int num_threads) {
  const cpu::ActivationPlan plan =
      cpu::plan_cpu_activation({args.rows, args.d, args.activation, best_cpu_isa(), num_threads}, overrides);
  if (plan.kernel == cpu::ActivationKernel::kReference) return act_and_mul_ref(args);
  cpu::run_silu_and_mul(args, plan);
}

}  // namespace fp8kit::ops
