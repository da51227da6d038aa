// CPU reference of reshape_and_cache_flash (kv_cache_ref.h): tokens in parallel, each written
// element by element with the store formula of the header.
#include "ops/kv_cache/kv_cache_ref.h"

#include <cstring>

#include "core/parallel.h"
#include "fp8kit/fp8.h"
#include "fp8kit/half.h"

namespace fp8kit::ops {
namespace {

template <typename T>
void store_row(const T* src, void* cache, int64_t offset, int64_t head_size, KvCacheDtype dtype, float scale) {
  if (dtype == KvCacheDtype::kAuto) {
    std::memcpy(static_cast<T*>(cache) + offset, src, sizeof(T) * head_size);
    return;
  }
  uint8_t* dst = static_cast<uint8_t*>(cache) + offset;
  for (int64_t d = 0; d < head_size; ++d) dst[d] = kv_cache_encode(to_float(src[d]), scale, dtype);
}

template <typename T>
void run(const ReshapeAndCacheArgs& a, int num_parts) {
  const auto* key = static_cast<const T*>(a.key);
  const auto* value = static_cast<const T*>(a.value);
  const int64_t block_size = a.key_layout.block_size;
  const int64_t grain = (a.num_tokens + num_parts - 1) / num_parts;
  parallel_for(a.num_tokens, grain, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t slot = a.slot_mapping[t];
      if (slot < 0) continue;  // padding: nothing is written
      const int64_t block = slot / block_size, page = slot % block_size;
      for (int64_t h = 0; h < a.key_layout.num_kv_heads; ++h) {
        const float s_k = a.k_scale ? a.k_scale[h * a.kv_scale_stride] : 1.0f;
        const float s_v = a.v_scale ? a.v_scale[h * a.kv_scale_stride] : 1.0f;
        store_row(key + t * a.key_token_stride + h * a.key_head_stride, a.key_cache,
                  a.key_layout.offset(block, page, h), a.key_layout.head_size, a.cache_dtype, s_k);
        store_row(value + t * a.value_token_stride + h * a.value_head_stride, a.value_cache,
                  a.value_layout.offset(block, page, h), a.value_layout.head_size, a.cache_dtype, s_v);
      }
    }
  });
}

}  // namespace

uint8_t kv_cache_encode(float x, float scale, KvCacheDtype dtype) {
  const float y = x / scale;  // vLLM: __nv_cvt_float_to_fp8(x / scale, __NV_SATFINITE, type)
  return dtype == KvCacheDtype::kFp8E5M2 ? float_to_e5m2_bits(y, Saturation::kSatFinite)
                                         : float_to_e4m3fn_bits(y, Saturation::kSatFinite);
}

float kv_cache_decode(uint8_t byte, KvCacheDtype dtype) {
  return dtype == KvCacheDtype::kFp8E5M2 ? e5m2_bits_to_float(byte) : e4m3fn_bits_to_float(byte);
}

void reshape_and_cache_flash_ref(const ReshapeAndCacheArgs& args, int num_parts) {
  if (args.num_tokens == 0) return;
  switch (args.src_dtype) {
    case DType::kBF16: return run<BFloat16>(args, num_parts);
    case DType::kF16: return run<Float16>(args, num_parts);
    default: return run<float>(args, num_parts);
  }
}

}  // namespace fp8kit::ops
