// plan_cpu_quant (quant_cpu_plan.h): below ~64 Ki elements one thread (a hand-off costs more
// than the work: ~25 us of it at 2.5 G elements/s).
#include "ops/quant/quant_cpu_plan.h"

#include <algorithm>

namespace fp8kit::ops::cpu {

QuantPlan plan_cpu_quant(const QuantDesc& d, const Overrides& overrides) {
  QuantPlan plan;
  if (overrides.cpu_backend == CpuBackend::kReference) {
    plan.reason = "FP8KIT_CPU_BACKEND=reference";
    return plan;
  }
  if (d.rows == 0 || d.k == 0) {
    plan.reason = "empty input: nothing to vectorize (and no row pointer to offset)";
    return plan;
  }
  if (d.isa < CpuIsa::kAvx2) {
    plan.reason = "no AVX2: the reference's vectorized loops are the portable path";
    return plan;
  }
  plan.kernel = QuantKernel::kAvx2;
  const int64_t elements = d.rows * d.k;
  const int64_t by_work = std::max<int64_t>(1, elements >> 16);
  plan.threads = int(std::clamp<int64_t>(std::min<int64_t>(by_work, d.rows), 1, std::max(d.max_threads, 1)));
  return plan;
}

}  // namespace fp8kit::ops::cpu
