// Argument block of reshape_and_cache_flash (include/fp8kit/ops/kv_cache.h), validated by
// kv_cache.cpp: raw pointers, strides in elements, dtypes. The CPU reference (kv_cache_ref.h)
// takes it, and a CUDA launcher will take the same struct, so one value drives both in tests.
// Pointers live on the op's device.
#pragma once

#include <cstdint>

#include "fp8kit/dtype.h"
#include "fp8kit/ops/kv_cache.h"

namespace fp8kit::ops {

// Where element (block, offset, head, d) of a paged cache lives (d is contiguous).
struct PagedCacheLayout {
  int64_t num_blocks = 0, block_size = 0, num_kv_heads = 0, head_size = 0;
  int64_t block_stride = 0, page_stride = 0, head_stride = 0;  // elements of the cache dtype

  int64_t offset(int64_t block, int64_t page, int64_t head) const {
    return block * block_stride + page * page_stride + head * head_stride;
  }
};

struct ReshapeAndCacheArgs {
  int64_t num_tokens = 0;       // slot_mapping.size(0)
  const void* key = nullptr;    // [num_tokens, num_kv_heads, head_size] of src_dtype
  const void* value = nullptr;  // same shape and dtype
  int64_t key_token_stride = 0, key_head_stride = 0;
  int64_t value_token_stride = 0, value_head_stride = 0;
  DType src_dtype = DType::kBF16;  // f32 | f16 | bf16
  void* key_cache = nullptr;       // elements of the cache dtype (src_dtype for kAuto, bytes for fp8)
  void* value_cache = nullptr;
  PagedCacheLayout key_layout, value_layout;
  const int64_t* slot_mapping = nullptr;  // [num_tokens]; < 0: skip
  KvCacheDtype cache_dtype = KvCacheDtype::kAuto;
  const float* k_scale = nullptr;  // fp8 only: [num_kv_heads] or [1]
  const float* v_scale = nullptr;
  int64_t kv_scale_stride = 0;  // 0: per tensor, 1: per KV head
};

}  // namespace fp8kit::ops
