// The tensor-core paged-attention kernels of head size 64 (attention_mma_instances.cuh): bf16 and f16 queries,
// FP8 and 16-bit caches, the prefill and the decode shape. One file per head size, so that the
// instances compile in parallel. Tests: tests/gpu/test_attention_cuda.cpp.
#include "ops/attention/attention_mma_instances.cuh"

namespace fp8kit::ops::attention_kernels {

void launch_attention_mma_d64(const AttnParams& p, const AttentionLaunch& l, cudaStream_t stream) {
  mma::launch_head_size<64>(p, l, stream);
}

}  // namespace fp8kit::ops::attention_kernels
