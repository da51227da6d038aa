// A CUDA stream, named without CUDA types: `handle` is a cudaStream_t. The default (null) is the
// legacy default stream. Ops take a Stream for their device work; CPU ops ignore it.
#pragma once

namespace fp8kit {

struct Stream {
  void* handle = nullptr;
};

}  // namespace fp8kit
