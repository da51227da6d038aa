// paged_attention on the fast CPU backend: read mode kDequantize with the same per-element values
// as the reference (k^ = f32(decode) * k_scale, q and cached 16-bit elements widened exactly), and
// the reference's softmax in another order: the logits s_j = f32(q . k^_j) * scale by f32 FMAs,
// then over chunks of 16 keys an online softmax (m the running maximum, p_j = e^(s_j - m) by a
// polynomial within ~1 ulp of expf, l and acc = sum p_j v^_j rescaled when m grows), out =
// T(acc / l); NaN and inf propagate as in the reference, and keys a row does not see never reach
// it. kFp8Compute, CPUs without AVX2/FMA/F16C and Overrides::cpu_backend = kReference take
// paged_attention_ref. Tested by tests/cpu/test_paged_attention*.cpp (the default context runs this
// path) and PagedAttentionCpu.* (within the calibrated bound, close to the reference).
#pragma once

#include "fp8kit/runtime/overrides.h"
#include "ops/attention/attention_args.h"

namespace fp8kit::ops {

void paged_attention_cpu(const PagedAttentionArgs& args, const Overrides& overrides, int num_threads);

}  // namespace fp8kit::ops
