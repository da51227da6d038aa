// plan_cpu_activation: which CPU implementation serves silu_and_mul / gelu_and_mul: the
// reference (activation_ref.cpp; gelu, FP8KIT_CPU_BACKEND=reference, or no AVX2) or the AVX2
// silu (activation_cpu_avx2.cpp), on how many threads. Pure host code. Tested by
// tests/cpu/test_activation_cpu.cpp.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/cpu_features.h"
#include "fp8kit/runtime/overrides.h"
#include "ops/activation/activation_args.h"

namespace fp8kit::ops::cpu {

struct ActivationDesc {
  int64_t rows = 0, d = 0;
  GatedActivation activation = GatedActivation::kSilu;
  CpuIsa isa = CpuIsa::kPortable;
  int max_threads = 1;
};

enum class ActivationKernel : uint8_t { kReference, kAvx2Silu };

struct ActivationPlan {
  ActivationKernel kernel = ActivationKernel::kReference;
  int threads = 1;
  std::string_view reason;
};

ActivationPlan plan_cpu_activation(const ActivationDesc& desc, const Overrides& overrides);

}  // namespace fp8kit::ops::cpu
