// Greedy sampling on CUDA (include/fp8kit/ops/sampling.h): per row the argmax (ties to the lowest
// id), its raw logprob x - logsumexp(x) in double rounded once, and its rank, with the faults the
// host entry reports as errors (a NaN or +inf logit, a row of -inf), found on the device. The
// double sum runs in another order than the reference's (id order), so a logprob may differ from
// it where x - logsumexp(x) lies within ~1e-16 (relative) of an f32 rounding boundary. Rows that
// sample (temperature > 0) or top logprobs stay on the host. Kernel: sampling_cuda.cu; tests:
// tests/gpu/test_sampling_cuda.cpp.
#pragma once

#include <cstddef>
#include <cstdint>

#include "fp8kit/dtype.h"
#include "fp8kit/stream.h"

namespace fp8kit::ops {

struct GreedySampleArgs {
  int64_t num_seqs = 0, vocab = 0;
  const void* logits = nullptr;  // [num_seqs, vocab] of dtype on the device, row r at logits + r * row_stride
  int64_t row_stride = 0;
  DType dtype = DType::kF32;
  int64_t* token_ids = nullptr;  // [num_seqs]
  float* logprobs = nullptr;     // [num_seqs]
  int64_t* ranks = nullptr;      // [num_seqs]
  // [num_seqs, 3]: the first id whose logit is NaN, the first that is +inf (-1: none), and 1 when
  // every logit of the row is -inf (else 0). The outputs of a row with a fault are unspecified.
  int64_t* faults = nullptr;
};

#if FP8KIT_WITH_CUDA
void greedy_sample_cuda(const GreedySampleArgs& args, Stream stream);
#endif

}  // namespace fp8kit::ops
