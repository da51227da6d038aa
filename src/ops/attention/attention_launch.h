// The launches of the paged-attention kernels, called by the launcher (attention_cuda.cu) with
// the kernels' parameter block (attention_common.cuh): the CUDA-core kernel (attention_simt.cu)
// and the tensor-core kernel per head size (attention_mma_d{64,128,256}.cu, attention_mma.cuh).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "fp8kit/dtype.h"
#include "fp8kit/ops/attention.h"

namespace fp8kit::ops::attention_kernels {

struct AttnParams;

// What selects a kernel instance, beyond the parameters.
struct AttentionLaunch {
  DType dtype = DType::kBF16;  // of q and out
  KvCacheDtype cache_dtype = KvCacheDtype::kAuto;
  AttentionReadMode read_mode = AttentionReadMode::kDequantize;
  int64_t items_bound = 0;
  int warps_m = 1;           // mma: 4 (prefill, 64-row items) or 1 (decode, 8- or 16-row items)
  int decode_stages = 0;     // mma decode kernel, FP8 cache: its stages (the plan's)
  bool cache_vector = false;  // cache rows allow 16-byte (simt: 8-element) loads
  bool q_vector = false;      // q rows allow 16-byte loads
};

void launch_attention_simt(const AttnParams& p, const AttentionLaunch& l, cudaStream_t stream);
void launch_attention_mma_d64(const AttnParams& p, const AttentionLaunch& l, cudaStream_t stream);
void launch_attention_mma_d128(const AttnParams& p, const AttentionLaunch& l, cudaStream_t stream);
void launch_attention_mma_d256(const AttnParams& p, const AttentionLaunch& l, cudaStream_t stream);

}  // namespace fp8kit::ops::attention_kernels
