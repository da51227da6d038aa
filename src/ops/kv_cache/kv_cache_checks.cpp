// Argument checks of the paged KV cache (kv_cache_checks.h).
#include "ops/kv_cache/kv_cache_checks.h"

#include "ops/op_checks.h"

namespace fp8kit::ops::detail {
namespace {

bool fp8_cache_dtype_ok(DType d, KvCacheDtype kv) {
  if (d == DType::kU8) return true;
  return kv == KvCacheDtype::kFp8E5M2 ? d == DType::kE5M2 : d == DType::kE4M3FN;
}

PagedCacheLayout layout_of(const Tensor& cache) {
  PagedCacheLayout l;
  l.num_blocks = cache.size(0);
  l.block_size = cache.size(1);
  l.num_kv_heads = cache.size(2);
  l.head_size = cache.size(3);
  l.block_stride = cache.stride(0);
  l.page_stride = cache.stride(1);
  l.head_stride = cache.stride(2);
  return l;
}

}  // namespace

CacheLayouts check_paged_caches(std::string_view op, const Tensor& key_cache, const Tensor& value_cache,
                                KvCacheDtype kv_cache_dtype, DType model_dtype) {
  require_defined(op, key_cache, "key_cache");
  require_defined(op, value_cache, "value_cache");
  require_dim(op, key_cache, "key_cache", 4);
  require_dim(op, value_cache, "value_cache", 4);
  FP8KIT_CHECK_ARG(key_cache.shape() == value_cache.shape(),
                   "{}: `key_cache` {} and `value_cache` {} must have one shape [num_blocks, block_size, "
                   "num_kv_heads, head_size]",
                   op, shape_to_string(key_cache.shape()), shape_to_string(value_cache.shape()));
  FP8KIT_CHECK_ARG(key_cache.size(1) > 0, "{}: the block size of `key_cache` must be positive, got {}", op,
                   key_cache.description());
  for (const auto& [cache, name] : {std::pair{&key_cache, "key_cache"}, std::pair{&value_cache, "value_cache"}}) {
    FP8KIT_CHECK_ARG(cache->stride(3) == 1 || cache->size(3) <= 1,
                     "{}: the last dimension of `{}` must be contiguous, got strides {}", op, name,
                     shape_to_string(cache->strides()));
    for (int64_t d = 0; d < 3; ++d) {
      FP8KIT_CHECK_ARG(cache->stride(d) >= 0, "{}: `{}` has a negative stride: {}", op, name,
                       shape_to_string(cache->strides()));
    }
    if (kv_cache_dtype == KvCacheDtype::kAuto) {
      FP8KIT_CHECK_ARG(cache->dtype() == model_dtype,
                       "{}: with kv_cache_dtype auto, `{}` must be {} (the dtype of "
                       "the keys), got {}",
                       op, name, dtype_name(model_dtype), cache->description());
    } else {
      FP8KIT_CHECK_ARG(fp8_cache_dtype_ok(cache->dtype(), kv_cache_dtype),
                       "{}: with kv_cache_dtype {}, `{}` must be u8 or {}, got {}", op,
                       kv_cache_dtype_name(kv_cache_dtype), name,
                       kv_cache_dtype == KvCacheDtype::kFp8E5M2 ? "e5m2" : "e4m3fn", cache->description());
    }
  }
  return {layout_of(key_cache), layout_of(value_cache)};
}

int64_t check_kv_scales(std::string_view op, const Tensor& k_scale, const Tensor& v_scale, int64_t num_kv_heads) {
  require_defined(op, k_scale, "k_scale");
  require_defined(op, v_scale, "v_scale");
  const int64_t n = k_scale.numel();
  FP8KIT_CHECK_ARG(n == v_scale.numel() && (n == 1 || n == num_kv_heads),
                   "{}: k_scale and v_scale must be of shape [1] or [num_heads] (num_heads = {}), got {} and {}", op,
                   num_kv_heads, shape_to_string(k_scale.shape()), shape_to_string(v_scale.shape()));
  for (const auto& [s, name] : {std::pair{&k_scale, "k_scale"}, std::pair{&v_scale, "v_scale"}}) {
    FP8KIT_CHECK_ARG(s->dtype() == DType::kF32, "{}: `{}` must be f32, got {}", op, name, s->description());
    FP8KIT_CHECK_ARG(s->is_contiguous(), "{}: `{}` must be contiguous", op, name);
  }
  return n == 1 ? 0 : 1;
}

void check_kv_rows(std::string_view op, const Tensor& key, const Tensor& value, int64_t num_kv_heads,
                   int64_t head_size) {
  require_defined(op, key, "key");
  require_defined(op, value, "value");
  require_dim(op, key, "key", 3);
  require_dim(op, value, "value", 3);
  require_float_input(op, key, "key");
  FP8KIT_CHECK_ARG(value.dtype() == key.dtype(), "{}: `value` must have the dtype of `key` ({}), got {}", op,
                   dtype_name(key.dtype()), value.description());
  FP8KIT_CHECK_ARG(key.shape() == value.shape(), "{}: `key` {} and `value` {} must have one shape", op,
                   shape_to_string(key.shape()), shape_to_string(value.shape()));
  FP8KIT_CHECK_ARG(key.size(1) == num_kv_heads && key.size(2) == head_size,
                   "{}: `key` must be [num_tokens, {}, {}] to match the caches (num_kv_heads, head_size), got {}", op,
                   num_kv_heads, head_size, key.description());
  for (const auto& [t, name] : {std::pair{&key, "key"}, std::pair{&value, "value"}}) {
    FP8KIT_CHECK_ARG(t->stride(2) == 1 || t->size(2) <= 1,
                     "{}: the last dimension of `{}` must be contiguous, got "
                     "strides {}",
                     op, name, shape_to_string(t->strides()));
  }
}

}  // namespace fp8kit::ops::detail
