// apply_rope on the CPU: the fast backend's AVX2 rotation (rope_cpu.cpp) for the neox layout with
// rotary_dim / 2 a multiple of 8, else (GPT-J pairs, other widths, CPUs without AVX2/FMA/F16C,
// Overrides::cpu_backend = kReference) the reference (rope_ref.h). The AVX2 rotation computes
// the reference's values bit for bit: the same cos/sin per token (rope_freqs.h, rounded to the
// dtype) and T(T(x c) - T(y s)), T(T(y c) + T(x s)) with the same f32 operations and roundings.
// Tests: tests/cpu/test_rope.cpp (RopeCpu.*: fast against reference byte for byte).
#pragma once

#include "fp8kit/runtime/overrides.h"
#include "ops/rope/rope_args.h"

namespace fp8kit::ops {

void apply_rope_cpu(const RopeArgs& args, const Overrides& overrides, int num_threads);

}  // namespace fp8kit::ops
