// CPU reference of sample (include/fp8kit/ops/sampling.h): one row at a time, rows dealt to
// num_parts parts on the thread pool. sampling_probs_ref exposes the final distribution of one
// row (after temperature, min-p, top-k, top-p) for the exclusion tests. Tested by
// tests/cpu/test_sampling.cpp.
#pragma once

#include <vector>

#include "ops/sampling/sampling_args.h"

namespace fp8kit::ops {

void sample_ref(const SamplingArgs& args);

// The probabilities the draw of a non-greedy row uses, for logits x (f32) and params p.
std::vector<float> sampling_probs_ref(const std::vector<float>& x, const SamplingParams& p);

}  // namespace fp8kit::ops
