// paged_attention on the fast CPU backend: read mode kDequantize with the same per-element values
// as the reference (k^ = f32(decode) * k_scale, q and cached 16-bit elements widened exactly), but
// two passes over a row's visible keys instead of the online softmax: the logits s_j = f32(q . k^_j)
// * scale (16 lanes of f32 sums, then a fixed tree), m = max s_j, p_j = expf(s_j - m), l = sum p_j
// in key order, acc = sum p_j v^_j in key order, out = T(acc / l). kFp8Compute, CPUs without
// AVX2/FMA/F16C and Overrides::cpu_backend = kReference take paged_attention_ref. Tested by
// tests/cpu/test_paged_attention*.cpp (the default context runs this path) and PagedAttentionCpu.*.
#pragma once

#include "fp8kit/runtime/overrides.h"
#include "ops/attention/attention_args.h"

namespace fp8kit::ops {

void paged_attention_cpu(const PagedAttentionArgs& args, const Overrides& overrides, int num_threads);

}  // namespace fp8kit::ops
