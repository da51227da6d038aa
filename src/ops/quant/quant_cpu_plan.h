// plan_cpu_quant: which CPU implementation serves an activation quantization (scaled_fp8_quant,
// per_token_group_quant): the reference (quant_ref.cpp, whose plain loops the compiler already
// vectorizes: it is the portable path too) or the AVX2 element kernels (quant_cpu_avx2.cpp),
// and on how many threads. Pure host code. Tested by tests/cpu/test_quant_cpu.cpp.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/cpu_features.h"
#include "fp8kit/runtime/overrides.h"

namespace fp8kit::ops::cpu {

struct QuantDesc {
  int64_t rows = 0, k = 0;
  CpuIsa isa = CpuIsa::kPortable;
  int max_threads = 1;
};

enum class QuantKernel : uint8_t { kReference, kAvx2 };

struct QuantPlan {
  QuantKernel kernel = QuantKernel::kReference;
  int threads = 1;
  std::string_view reason;  // why the reference serves, when it does
};

QuantPlan plan_cpu_quant(const QuantDesc& desc, const Overrides& overrides);

}  // namespace fp8kit::ops::cpu
