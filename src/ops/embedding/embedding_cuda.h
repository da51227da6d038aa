// The CUDA launcher of embedding (include/fp8kit/ops/embedding.h): the EmbeddingArgs of the CPU
// reference (embedding_ref.h) with device pointers, one launch on `stream`, no host
// synchronization, bit-exact with the reference. The ids are read on the device: an id outside
// this rank's rows gives a zero row there, an id outside the vocabulary too (the CPU entry
// reports it as an error; a kernel cannot without a host synchronization).
// Kernel: embedding_cuda.cu. Tests: tests/gpu/test_embedding_cuda.cpp.
#pragma once

#include <cstddef>

#include "fp8kit/stream.h"
#include "ops/embedding/embedding_args.h"

namespace fp8kit::ops {

#if FP8KIT_WITH_CUDA
// Expects args' device to be current (detail::route sets it).
void embedding_cuda(const EmbeddingArgs& args, Stream stream);
#else
inline constexpr std::nullptr_t embedding_cuda = nullptr;  // detail::route reports the missing backend
#endif

}  // namespace fp8kit::ops
