// rms_norm / fused_add_rms_norm on the CPU: the fast backend's AVX2 rows (rms_norm_cpu.cpp) or
// the reference (rms_norm_ref.h), as Overrides::cpu_backend and the CPU decide. The AVX2 rows
// compute the reference's values bit for bit: the residual T(x + residual) and the output
// T(T(x * r) * w) with the same f32 operations and roundings, and r from the same double-double
// sum of squares (rms_norm_math.h), which lands on the correctly rounded double sum in any order
// of its additions (here 8 lanes, merged in lane order). Tests: tests/cpu/test_rms_norm.cpp
// (RmsNormCpu.*: fast against reference byte for byte).
#pragma once

#include "fp8kit/runtime/overrides.h"
#include "ops/norm/rms_norm_args.h"

namespace fp8kit::ops {

void rms_norm_cpu(const RmsNormArgs& args, const Overrides& overrides, int num_threads);

}  // namespace fp8kit::ops
