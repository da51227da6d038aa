// Token sampling from logits with vLLM's semantics and order of application (vllm/v1/sample/
// sampler.py, ops/topk_topp_sampler.py's PyTorch path, the min-p logits processor): greedy,
// temperature, min-p, top-k, top-p, then a draw with per-sequence seeds from a counter-based
// PRNG, so a request's samples do not depend on what else is in the batch. Also the
// log-probabilities of the raw logits. CPU reference: src/ops/sampling/sampling_ref.cpp; tests:
// tests/cpu/test_sampling.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "fp8kit/runtime/forward_context.h"
#include "fp8kit/tensor.h"

namespace fp8kit::ops {

// One sequence's parameters (vLLM's SamplingParams fields of the same names).
struct SamplingParams {
  float temperature = 1.0f;  // finite, >= 0; below 1e-5 (vLLM's _SAMPLING_EPS): greedy
  int64_t top_k = 0;         // keep the k largest (ties with the k-th kept); <= 0 or >= vocab: off
  float top_p = 1.0f;        // in (0, 1]; 1: off
  float min_p = 0.0f;        // in [0, 1]; 0: off
  uint64_t seed = 0;         // the request's seed (an engine draws one for requests without)
  uint64_t step = 0;         // the PRNG counter: the index of the token being sampled for the request
};

struct SamplingOptions {
  int64_t num_logprobs = 0;  // top-n raw logprobs per sequence, 0..vocab (vLLM's logprobs=n)
};

struct SamplingResult {
  Tensor token_ids;     // i64 [num_seqs]
  Tensor logprobs;      // f32 [num_seqs]: log_softmax of the raw logits at the chosen token
  Tensor ranks;         // i64 [num_seqs]: how many tokens have a raw logprob >= the chosen one's (1 = the best)
  Tensor top_ids;       // i64 [num_seqs, num_logprobs]: highest raw logprobs first, ties to the lower id
  Tensor top_logprobs;  // f32 [num_seqs, num_logprobs]
};

// ---------------------------------------------------------------------------------------------
// sample(ctx, logits [num_seqs, vocab] f32|f16|bf16 (last dimension contiguous), params[num_seqs])
// Per row, with x = f32(logits) and softmax(z)_v = f32(e_v / f32(sum_u e_u)), e_v = expf(z_v -
// max z) (the sum in double, in id order):
//   logprob_v = f32(x_v - logsumexp(x))   (in double, rounded once)
//   greedy (temperature < 1e-5): token = argmax_v x_v, ties to the lowest id
//   else  z = x / temperature (f32); then, in vLLM's order, each on the z left by the one before:
//     min-p: p = softmax(z); z_v = -inf where p_v < max(p) * min_p (f32)
//     top-k: z_v = -inf where z_v < the k-th largest z (duplicates counted)
//     top-p: p = softmax(z); order the ids by ascending z (ties: higher id first); c = cumulative
//            sums of p in that order (f32); z_v = -inf where c <= 1 - top_p, except the last
//            (largest) id, which always stays
//     p = softmax(z); token = argmax_v p_v / q_v (the exponential race of vLLM's random_sample,
//     scores in double, ties to the lowest id), q_v = -ln(u(seed, step, v)) with the PRNG of
//     docs/numerics.md (splitmix64 of seed, step and v; u uniform in (0, 1)).
// Errors (kInvalidArgument): a NaN ("sampling: logits[1, 3] is NaN") or +inf logit, a row whose
// logits are all -inf, parameters out of range (naming the row and field), a params count that
// is not num_seqs.
// ---------------------------------------------------------------------------------------------
SamplingResult sample(const ForwardContext& ctx, const Tensor& logits, const std::vector<SamplingParams>& params,
                      const SamplingOptions& options = {});

}  // namespace fp8kit::ops
