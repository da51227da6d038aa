// The paged KV cache store: vLLM's reshape_and_cache_flash (spec KV_CACHE_ATTENTION.md 1.1-1.4,
// SEMANTICS.md 1.13 / 2.4). The K/V rows of this step's tokens go into per-layer caches of
// logical shape [num_blocks, block_size, num_kv_heads, head_size] addressed by strides, so the
// NHD layout, the HND layout ([num_blocks, num_kv_heads, block_size, head_size] in memory,
// passed as its transposed view) and caches whose blocks are interleaved with other data
// (block_stride != block_size * num_kv_heads * head_size) are one op. CPU reference:
// src/ops/kv_cache/kv_cache_ref.cpp; tests: tests/cpu/test_kv_cache.cpp.
#pragma once

#include <cstdint>
#include <string_view>

#include "fp8kit/runtime/forward_context.h"
#include "fp8kit/tensor.h"

namespace fp8kit::ops {

// kv_cache_dtype: "auto" (the model dtype, a plain copy; scales ignored), "fp8" = "fp8_e4m3"
// (OCP e4m3fn bytes), "fp8_e5m2".
enum class KvCacheDtype : uint8_t { kAuto, kFp8E4M3, kFp8E5M2 };

// Parses vLLM's cache_dtype strings; anything else is Error(kInvalidArgument)
// "Unsupported data type of kv cache: {d}" (the kernel's text).
KvCacheDtype parse_kv_cache_dtype(std::string_view kv_cache_dtype);
const char* kv_cache_dtype_name(KvCacheDtype dtype);  // "auto", "fp8_e4m3", "fp8_e5m2"

// ---------------------------------------------------------------------------------------------
// reshape_and_cache_flash(ctx, key, value, key_cache, value_cache, slot_mapping, kv_cache_dtype,
//                         k_scale, v_scale)
//   key, value   [num_key_rows, num_kv_heads, head_size] f32|f16|bf16, same dtype and shape; the
//                last dimension contiguous, any token and head strides (a slice of a fused qkv
//                output). Only the first num_tokens = slot_mapping.size(0) rows are read (vLLM
//                pads key/value, not slot_mapping); num_tokens <= num_key_rows.
//   key_cache, value_cache
//                [num_blocks, block_size, num_kv_heads, head_size], the last dimension contiguous,
//                any other strides (each cache its own); auto: the dtype of key; fp8: u8 or the
//                fp8 dtype of kv_cache_dtype (e4m3fn / e5m2).
//   slot_mapping [num_tokens] i64: token t goes to block slot / block_size, offset slot %
//                block_size; a negative slot (PAD_SLOT_ID = -1) skips the token (nothing is
//                written); a slot >= num_blocks * block_size is an error.
//   k_scale, v_scale
//                f32, numel 1 (per tensor) or num_kv_heads (per KV head), equal numel; dequant
//                scales (x ~= decode(byte) * s). Ignored (may be undefined) for auto.
// For every kept token t, head h, element d:
//   auto: cache = key[t, h, d] (bit copy)
//   fp8:  cache = encode_satfinite(f32(key[t, h, d]) / s_k[h])   (IEEE f32 division, not a
//         reciprocal multiply; round to nearest even; |y| beyond max and +-inf -> +-max; NaN ->
//         0x7F; tiny -> signed zero), e4m3fn or e5m2 as kv_cache_dtype says; the same for V.
// Slots not named are never touched. Two tokens naming one slot leave either token's values (as
// in vLLM, whose kernel writes tokens in parallel).
// ---------------------------------------------------------------------------------------------
void reshape_and_cache_flash(const ForwardContext& ctx, const Tensor& key, const Tensor& value, const Tensor& key_cache,
                             const Tensor& value_cache, const Tensor& slot_mapping, KvCacheDtype kv_cache_dtype,
                             const Tensor& k_scale, const Tensor& v_scale);

}  // namespace fp8kit::ops
