// CPU reference of rms_norm / fused_add_rms_norm (include/fp8kit/ops/norm.h): one row at a time,
// rows split into num_parts chunks on the thread pool. Tested by tests/cpu/test_rms_norm.cpp.
#pragma once

#include "ops/norm/rms_norm_args.h"

namespace fp8kit::ops {

// residual == nullptr: rms_norm; otherwise fused_add_rms_norm.
void rms_norm_ref(const RmsNormArgs& args, int num_parts);

}  // namespace fp8kit::ops
