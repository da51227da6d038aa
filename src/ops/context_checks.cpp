// Checks shared by the ForwardContext ops (context_checks.h).
#include "ops/context_checks.h"

#include <algorithm>

#include "core/check.h"

namespace fp8kit::ops::detail {

void require_context_device(std::string_view op, const ForwardContext& ctx, const Tensor& t, std::string_view name) {
  if (!t.defined()) return;
  FP8KIT_CHECK_ARG(t.device() == ctx.device(), "{}: `{}` is on {} but the context is on {}", op, name, t.device().str(),
                   ctx.device().str());
}

void require_reference_backend(std::string_view op, Device device) {
  FP8KIT_CHECK(device.is_cpu(), ErrorCode::kUnsupported, "{}: no CUDA kernel yet", op);
}

int work_parts(const ForwardContext& ctx) { return std::max(1, ctx.num_threads()); }

int work_parts(const ForwardContext& ctx, int64_t work, int64_t per_part) {
  const int64_t parts = work / std::max<int64_t>(per_part, 1);
  return int(std::clamp<int64_t>(parts, 1, work_parts(ctx)));
}

}  // namespace fp8kit::ops::detail
