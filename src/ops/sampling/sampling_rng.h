// The counter-based PRNG of sampling (include/fp8kit/ops/sampling.h), shared by the CPU
// reference and a future CUDA kernel: the random number of token v when sequence (seed, step)
// samples is a pure function of the three, so a request's draws are the same whatever else is
// in the batch and in whatever order the vocabulary is visited. splitmix64's finalizer (Steele,
// Lea, Flood 2014), keyed in three rounds.
#pragma once

#include <cstdint>

#include "fp8kit/host_device.h"

namespace fp8kit::ops {

// splitmix64: one step of the Weyl sequence (+ golden gamma), then the 64-bit finalizer.
FP8KIT_HOST_DEVICE uint64_t splitmix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// 64 random bits for token `token` of draw `step` of the stream `seed`.
FP8KIT_HOST_DEVICE uint64_t sampling_bits(uint64_t seed, uint64_t step, uint64_t token) {
  return splitmix64(splitmix64(splitmix64(seed) ^ step) ^ token);
}

// Uniform in (0, 1): the top 53 bits and a half, so neither 0 nor 1 occurs.
FP8KIT_HOST_DEVICE double sampling_uniform(uint64_t seed, uint64_t step, uint64_t token) {
  return (double(sampling_bits(seed, step, token) >> 11) + 0.5) * 0x1.0p-53;
}

}  // namespace fp8kit::ops
