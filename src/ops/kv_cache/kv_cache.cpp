// Public entry of the KV cache store (include/fp8kit/ops/kv_cache.h): parses kv_cache_dtype,
// validates every argument once (the cache rules in kv_cache_checks.h), fills ReshapeAndCacheArgs
// and routes by device (CPU: the reference). Tested by tests/cpu/test_kv_cache.cpp.
#include "fp8kit/ops/kv_cache.h"

#include "ops/context_checks.h"
#include "ops/kv_cache/kv_cache_checks.h"
#include "ops/kv_cache/kv_cache_ref.h"
#include "ops/op_checks.h"

namespace fp8kit::ops {

using namespace detail;

KvCacheDtype parse_kv_cache_dtype(std::string_view d) {
  if (d == "auto") return KvCacheDtype::kAuto;
  if (d == "fp8" || d == "fp8_e4m3") return KvCacheDtype::kFp8E4M3;
  if (d == "fp8_e5m2") return KvCacheDtype::kFp8E5M2;
  fail(ErrorCode::kInvalidArgument, "Unsupported data type of kv cache: {}", d);
}

const char* kv_cache_dtype_name(KvCacheDtype dtype) {
  switch (dtype) {
    case KvCacheDtype::kAuto: return "auto";
    case KvCacheDtype::kFp8E4M3: return "fp8_e4m3";
    case KvCacheDtype::kFp8E5M2: return "fp8_e5m2";
  }
  return "?";
}

void reshape_and_cache_flash(const ForwardContext& ctx, const Tensor& key, const Tensor& value, const Tensor& key_cache,
                             const Tensor& value_cache, const Tensor& slot_mapping, KvCacheDtype kv_cache_dtype,
                             const Tensor& k_scale, const Tensor& v_scale) {
  constexpr std::string_view kOp = "reshape_and_cache_flash";
  require_defined(kOp, key, "key");
  require_defined(kOp, slot_mapping, "slot_mapping");
  for (const auto& [t, name] : {std::pair{&key, "key"}, std::pair{&value, "value"}, std::pair{&key_cache, "key_cache"},
                                std::pair{&value_cache, "value_cache"}, std::pair{&slot_mapping, "slot_mapping"},
                                std::pair{&k_scale, "k_scale"}, std::pair{&v_scale, "v_scale"}}) {
    require_context_device(kOp, ctx, *t, name);
  }
  const CacheLayouts layouts = check_paged_caches(kOp, key_cache, value_cache, kv_cache_dtype, key.dtype());
  check_kv_rows(kOp, key, value, layouts.key.num_kv_heads, layouts.key.head_size);
  require_dim(kOp, slot_mapping, "slot_mapping", 1);
  FP8KIT_CHECK_ARG(slot_mapping.dtype() == DType::kI64 && slot_mapping.is_contiguous(),
                   "{}: `slot_mapping` must be a contiguous i64 tensor, got {}", kOp, slot_mapping.description());
  const int64_t num_tokens = slot_mapping.size(0);
  FP8KIT_CHECK_ARG(num_tokens <= key.size(0), "{}: `slot_mapping` has {} tokens but `key` only {} rows", kOp,
                   num_tokens, key.size(0));
  const bool fp8 = kv_cache_dtype != KvCacheDtype::kAuto;
  const int64_t scale_stride = fp8 ? check_kv_scales(kOp, k_scale, v_scale, layouts.key.num_kv_heads) : 0;
  require_reference_backend(kOp, ctx.device());

  // Host data from here on (the reference's inputs live in host memory).
  const auto* slots = slot_mapping.data<int64_t>();
  const int64_t num_slots = layouts.key.num_blocks * layouts.key.block_size;
  for (int64_t t = 0; t < num_tokens; ++t) {
    FP8KIT_CHECK_ARG(slots[t] < num_slots, "{}: slot_mapping[{}] = {} is beyond the cache ({} blocks of {} = {} slots)",
                     kOp, t, slots[t], layouts.key.num_blocks, layouts.key.block_size, num_slots);
  }

  ReshapeAndCacheArgs args;
  args.num_tokens = num_tokens;
  args.key = key.data_ptr();
  args.value = value.data_ptr();
  args.key_token_stride = key.stride(0);
  args.key_head_stride = key.stride(1);
  args.value_token_stride = value.stride(0);
  args.value_head_stride = value.stride(1);
  args.src_dtype = key.dtype();
  args.key_cache = key_cache.data_ptr();
  args.value_cache = value_cache.data_ptr();
  args.key_layout = layouts.key;
  args.value_layout = layouts.value;
  args.slot_mapping = slots;
  args.cache_dtype = kv_cache_dtype;
  if (fp8) {
    args.k_scale = k_scale.data<float>();
    args.v_scale = v_scale.data<float>();
    args.kv_scale_stride = scale_stride;
  }
  reshape_and_cache_flash_ref(args, work_parts(ctx));
}

}  // namespace fp8kit::ops
