// Argument checks of the paged KV cache, shared by reshape_and_cache_flash (kv_cache.cpp) and
// paged_attention (attention.cpp), so both ops state the same rules in the same words. Every
// message starts with the op's name and names the argument.
#pragma once

#include <string_view>

#include "fp8kit/ops/kv_cache.h"
#include "ops/kv_cache/kv_cache_args.h"

namespace fp8kit::ops::detail {

// key_cache and value_cache: 4-D [num_blocks, block_size, num_kv_heads, head_size] of one shape,
// last dimension contiguous, non-negative strides, and the element type kv_cache_dtype asks for
// (auto: model_dtype; fp8: u8 or the matching fp8 dtype). Returns their layouts.
struct CacheLayouts {
  PagedCacheLayout key, value;
};
CacheLayouts check_paged_caches(std::string_view op, const Tensor& key_cache, const Tensor& value_cache,
                                KvCacheDtype kv_cache_dtype, DType model_dtype);

// k_scale / v_scale of an FP8 cache: defined f32 tensors of equal numel, 1 or num_kv_heads
// ("k_scale and v_scale must be of shape [1] or [num_heads]"), contiguous. Returns the stride
// between the scales of consecutive KV heads (0 or 1).
int64_t check_kv_scales(std::string_view op, const Tensor& k_scale, const Tensor& v_scale, int64_t num_kv_heads);

// key / value rows: [rows, num_kv_heads, head_size] of one float dtype and shape, last dimension
// contiguous.
void check_kv_rows(std::string_view op, const Tensor& key, const Tensor& value, int64_t num_kv_heads,
                   int64_t head_size);

}  // namespace fp8kit::ops::detail
