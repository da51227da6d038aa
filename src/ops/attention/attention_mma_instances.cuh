// The tensor-core paged-attention instances of one head size (attention_mma_d{64,128,256}.cu):
// query dtype x cache kind x shape. 8- and 16-row items up to kAttentionMmaDecodeMaxHeadSize run the
// decode kernel (attention_mma_decode.cuh), the others the tile kernel (attention_mma.cuh).
#pragma once

#include "ops/attention/attention_mma.cuh"
#include "ops/attention/attention_mma_decode.cuh"

namespace fp8kit::ops::attention_kernels::mma {

template <int kD>
void launch_head_size(const AttnParams& p, const AttentionLaunch& l, cudaStream_t stream) {
  const bool fp8 = l.cache_dtype != KvCacheDtype::kAuto;
  auto with_tag = [&](auto tag) {
    using Tag = decltype(tag);
    if (l.warps_m == 4) {
      return fp8 ? launch_instance<Tag, kD, true, 4>(p, l, stream) : launch_instance<Tag, kD, false, 4>(p, l, stream);
    }
    if constexpr (kD <= kAttentionMmaDecodeMaxHeadSize) {
      return fp8 ? launch_decode_instance<Tag, kD, true>(p, l, stream)
                 : launch_decode_instance<Tag, kD, false>(p, l, stream);
    } else {
      return fp8 ? launch_instance<Tag, kD, true, 1>(p, l, stream) : launch_instance<Tag, kD, false, 1>(p, l, stream);
    }
  };
  if (l.dtype == DType::kBF16) {
    with_tag(Bf16{});
  } else {
    with_tag(F16{});
  }
}

}  // namespace fp8kit::ops::attention_kernels::mma
