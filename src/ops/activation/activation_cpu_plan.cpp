// plan_cpu_activation (activation_cpu_plan.h): one thread below ~32 Ki outputs (the AVX2 silu
// does ~1 G outputs a second a core: a hand-off would cost more than the work).
#include "ops/activation/activation_cpu_plan.h"

#include <algorithm>

namespace fp8kit::ops::cpu {

ActivationPlan plan_cpu_activation(const ActivationDesc& d, const Overrides& overrides) {
  ActivationPlan plan;
  if (overrides.cpu_backend == CpuBackend::kReference) {
    plan.reason = "FP8KIT_CPU_BACKEND=reference";
    return plan;
  }
  if (d.activation != GatedActivation::kSilu) {
    plan.reason = "gelu has no fast CPU kernel";
    return plan;
  }
  if (d.isa < CpuIsa::kAvx2) {
    plan.reason = "no AVX2";
    return plan;
  }
  plan.kernel = ActivationKernel::kAvx2Silu;
  const int64_t by_work = std::max<int64_t>(1, (d.rows * d.d) >> 15);
  plan.threads = int(std::clamp<int64_t>(std::min(by_work, d.rows), 1, std::max(d.max_threads, 1)));
  return plan;
}

}  // namespace fp8kit::ops::cpu
