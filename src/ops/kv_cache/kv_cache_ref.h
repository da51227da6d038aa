// CPU reference of reshape_and_cache_flash (include/fp8kit/ops/kv_cache.h): plain loops over
// tokens (in parallel), heads and elements; also the one element conversion fp8kit uses to store
// into an FP8 cache and to read it back, shared with the attention reference. Tested by
// tests/cpu/test_kv_cache.cpp.
#pragma once

#include "ops/kv_cache/kv_cache_args.h"

namespace fp8kit::ops {

void reshape_and_cache_flash_ref(const ReshapeAndCacheArgs& args, int num_parts);

// The stored byte: encode_satfinite(x / scale) in e4m3fn or e5m2 (IEEE f32 division).
uint8_t kv_cache_encode(float x, float scale, KvCacheDtype dtype);
// The FP8 value of a cache byte, exact in f32 (before any scale).
float kv_cache_decode(uint8_t byte, KvCacheDtype dtype);

}  // namespace fp8kit::ops
