// The CUDA launcher of reshape_and_cache_flash (include/fp8kit/ops/kv_cache.h): takes the
// ReshapeAndCacheArgs of the CPU reference (kv_cache_ref.h) with device pointers, queues one
// launch on `stream` (no host synchronization; CUDA-graph capturable) and is bit-exact with the
// reference. The slots are read on the device: a slot past the cache is skipped there (the CPU
// entry reports it as an error; a kernel cannot without a host synchronization).
// Kernels: kv_cache_cuda.cu. Tests: tests/gpu/test_kv_cache_cuda.cpp; benchmark: bench/bench_attention.
#pragma once

#include <cstddef>

#include "fp8kit/stream.h"
#include "ops/kv_cache/kv_cache_args.h"

namespace fp8kit::ops {

#if FP8KIT_WITH_CUDA
// Expects args' device to be current (detail::route sets it).
void reshape_and_cache_flash_cuda(const ReshapeAndCacheArgs& args, Stream stream);
#else
inline constexpr std::nullptr_t reshape_and_cache_flash_cuda = nullptr;  // detail::route reports the missing backend
#endif

}  // namespace fp8kit::ops
