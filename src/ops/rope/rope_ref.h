// CPU reference of apply_rope (include/fp8kit/ops/rope.h): tokens split into num_parts chunks
// on the thread pool; per token the cos/sin of every frequency once (rope_freqs.h), then every
// head of q and k. Tested by tests/cpu/test_rope.cpp.
#pragma once

#include "ops/rope/rope_args.h"

namespace fp8kit::ops {

void apply_rope_ref(const RopeArgs& args);

}  // namespace fp8kit::ops
