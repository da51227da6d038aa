// Argument block of sample (include/fp8kit/ops/sampling.h), validated by sampling.cpp. The CPU
// reference (sampling_ref.h) takes it, and a CUDA launcher will take the same struct (params
// then copied to the device).
#pragma once

#include <cstdint>

#include "fp8kit/dtype.h"
#include "fp8kit/ops/sampling.h"

namespace fp8kit::ops {

inline constexpr float kSamplingEps = 1e-5f;  // vLLM's _SAMPLING_EPS: greedy below this temperature

struct SamplingArgs {
  int64_t num_seqs = 0, vocab = 0;
  const void* logits = nullptr;  // [num_seqs, vocab] of dtype, row r at logits + r * row_stride
  int64_t row_stride = 0;
  DType dtype = DType::kF32;
  const SamplingParams* params = nullptr;  // [num_seqs] (host)
  int64_t num_logprobs = 0;
  int64_t* token_ids = nullptr;  // [num_seqs]
  float* logprobs = nullptr;     // [num_seqs]
  int64_t* ranks = nullptr;      // [num_seqs]
  int64_t* top_ids = nullptr;    // [num_seqs, num_logprobs]
  float* top_logprobs = nullptr;
  // Reference scratch per part: 2 vocab floats and vocab int32.
  float* scratch = nullptr;
  int32_t* scratch_ids = nullptr;
  int num_parts = 1;
};

}  // namespace fp8kit::ops
