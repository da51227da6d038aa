// Public entry of paged_attention (include/fp8kit/ops/attention.h): validates every argument once
// (shapes and dtypes; on the CPU also the metadata values the reference will index with, which
// CUDA leaves to its kernels: attention_cuda.h), writes the new K/V through
// reshape_and_cache_flash, fills PagedAttentionArgs with workspace scratch (CUDA: the plan's) and
// routes by device (CPU: the fast path of attention_cpu.h or the reference; CUDA:
// attention_cuda.h). Tested by tests/cpu/test_paged_attention*.cpp and
// tests/gpu/test_attention_cuda.cpp.
#include "fp8kit/ops/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>

#include "ops/attention/attention_cpu.h"
#include "ops/attention/attention_cuda.h"
#include "ops/attention/attention_ref.h"
#include "ops/context_checks.h"
#include "ops/kv_cache/kv_cache_checks.h"
#include "ops/op_checks.h"

namespace fp8kit::ops {

using namespace detail;

namespace {

constexpr std::string_view kOp = "paged_attention";

void require_i32_vector(const Tensor& t, std::string_view name, int64_t size) {
  require_defined(kOp, t, name);
  require_dim(kOp, t, name, 1);
  FP8KIT_CHECK_ARG(t.dtype() == DType::kI32 && t.is_contiguous(), "{}: `{}` must be a contiguous i32 tensor, got {}",
                   kOp, name, t.description());
  FP8KIT_CHECK_ARG(t.size(0) == size, "{}: `{}` must have {} entries, got {}", kOp, name, size, t.description());
}

void check_options(const PagedAttentionOptions& o, const PagedKvCache& cache, int64_t num_kv_heads) {
  if (o.scale) {
    FP8KIT_CHECK_ARG(std::isfinite(*o.scale) && *o.scale > 0.0f, "{}: `scale` must be finite and positive, got {}", kOp,
                     *o.scale);
  }
  FP8KIT_CHECK_ARG(std::isfinite(o.softcap) && o.softcap >= 0.0f,
                   "{}: `softcap` must be finite and non-negative (0: off), got {}", kOp, o.softcap);
  FP8KIT_CHECK_ARG(o.window_left >= -1 && o.window_right >= -1,
                   "{}: `window_left` and `window_right` must be >= -1 (-1: unbounded), got ({}, {})", kOp,
                   o.window_left, o.window_right);
  if (o.read_mode == AttentionReadMode::kFp8Compute) {
    FP8KIT_CHECK_ARG(cache.dtype == KvCacheDtype::kFp8E4M3,
                     "{}: the fp8 compute read mode needs an fp8_e4m3 cache, got kv_cache_dtype {}", kOp,
                     kv_cache_dtype_name(cache.dtype));
    require_defined(kOp, o.q_scale, "q_scale");
    FP8KIT_CHECK_ARG(o.q_scale.dtype() == DType::kF32 && o.q_scale.is_contiguous() &&
                         (o.q_scale.numel() == 1 || o.q_scale.numel() == num_kv_heads),
                     "{}: `q_scale` must be a contiguous f32 tensor of shape [1] or [num_kv_heads] (num_kv_heads = "
                     "{}), got {}",
                     kOp, num_kv_heads, o.q_scale.description());
  }
}

// The metadata values, read on the host: everything the reference indexes with is in range.
// Returns the largest seq_len.
int64_t check_metadata_values(const AttentionMetadata& md, int64_t num_seqs, int64_t num_tokens,
                              const PagedCacheLayout& layout, int64_t max_blocks) {
  const auto* qsl = md.query_start_loc.data<int32_t>();
  const auto* lens = md.seq_lens.data<int32_t>();
  FP8KIT_CHECK_ARG(qsl[0] == 0, "{}: query_start_loc[0] must be 0, got {}", kOp, qsl[0]);
  int64_t max_seq_len = 0;
  for (int64_t r = 0; r < num_seqs; ++r) {
    FP8KIT_CHECK_ARG(qsl[r + 1] >= qsl[r], "{}: `query_start_loc` must be non-decreasing, got {} then {} at {}", kOp,
                     qsl[r], qsl[r + 1], r);
    const int64_t q_len = qsl[r + 1] - qsl[r];
    FP8KIT_CHECK_ARG(lens[r] >= q_len, "{}: seq_lens[{}] = {} is below its {} query tokens", kOp, r, lens[r], q_len);
    const int64_t blocks = (int64_t(lens[r]) + layout.block_size - 1) / layout.block_size;
    FP8KIT_CHECK_ARG(blocks <= max_blocks,
                     "{}: seq_lens[{}] = {} needs {} blocks but `block_table` has {} per sequence", kOp, r, lens[r],
                     blocks, max_blocks);
    const int32_t* row = md.block_table.data<int32_t>() + r * md.block_table.stride(0);
    for (int64_t b = 0; b < blocks; ++b) {
      FP8KIT_CHECK_ARG(row[b] >= 0 && row[b] < layout.num_blocks,
                       "{}: block_table[{}][{}] = {} is outside the cache's {} blocks", kOp, r, b, row[b],
                       layout.num_blocks);
    }
    max_seq_len = std::max<int64_t>(max_seq_len, lens[r]);
  }
  FP8KIT_CHECK_ARG(qsl[num_seqs] <= num_tokens, "{}: query_start_loc[{}] = {} is beyond the {} rows of `q`", kOp,
                   num_seqs, qsl[num_seqs], num_tokens);
  return max_seq_len;
}

// The new tokens' slots agree with the block table: real tokens at their block-table slot,
// padding entries negative.
void check_slot_mapping(const AttentionMetadata& md, int64_t num_seqs, int64_t block_size) {
  const auto* qsl = md.query_start_loc.data<int32_t>();
  const auto* lens = md.seq_lens.data<int32_t>();
  const auto* slots = md.slot_mapping.data<int64_t>();
  const int64_t num_new = md.slot_mapping.size(0);
  FP8KIT_CHECK_ARG(num_new >= qsl[num_seqs], "{}: `slot_mapping` has {} entries for {} new tokens", kOp, num_new,
                   qsl[num_seqs]);
  for (int64_t r = 0; r < num_seqs; ++r) {
    const int32_t* row = md.block_table.data<int32_t>() + r * md.block_table.stride(0);
    const int64_t ctx_len = lens[r] - (qsl[r + 1] - qsl[r]);
    for (int64_t t = qsl[r]; t < qsl[r + 1]; ++t) {
      const int64_t pos = ctx_len + (t - qsl[r]);
      const int64_t expected = int64_t(row[pos / block_size]) * block_size + pos % block_size;
      FP8KIT_CHECK_ARG(slots[t] == expected,
                       "{}: slot_mapping[{}] = {} but the block table puts token {} (sequence {}, position {}) at "
                       "slot {}",
                       kOp, t, slots[t], t, r, pos, expected);
    }
  }
  for (int64_t t = qsl[num_seqs]; t < num_new; ++t) {
    FP8KIT_CHECK_ARG(slots[t] < 0, "{}: slot_mapping[{}] = {} belongs to a padding row and must be negative", kOp, t,
                     slots[t]);
  }
}

bool rows_aligned16(const void* base, std::initializer_list<int64_t> strides, size_t element_size) {
  if (reinterpret_cast<uintptr_t>(base) % 16 != 0) return false;
  for (int64_t s : strides) {
    if ((s * int64_t(element_size)) % 16 != 0) return false;
  }
  return true;
}

// What the CUDA plan knows of a call (attention_plan.h).
PagedAttentionDesc describe(const PagedAttentionArgs& a, const CacheLayouts& layouts, Device device) {
  PagedAttentionDesc d;
  d.num_tokens = a.num_tokens, d.num_seqs = a.num_seqs;
  d.num_heads = a.num_heads, d.num_kv_heads = a.num_kv_heads, d.head_size = a.head_size;
  d.max_seq_len_bound = a.max_seq_len;
  d.dtype = a.dtype, d.cache_dtype = a.cache_dtype, d.read_mode = a.read_mode;
  const size_t element = a.cache_dtype == KvCacheDtype::kAuto ? dtype_size(a.dtype) : 1;
  d.cache_rows_aligned16 =
      rows_aligned16(a.key_cache, {layouts.key.block_stride, layouts.key.page_stride, layouts.key.head_stride},
                     element) &&
      rows_aligned16(a.value_cache, {layouts.value.block_stride, layouts.value.page_stride, layouts.value.head_stride},
                     element) &&
      (a.head_size * int64_t(element)) % 16 == 0;
#if FP8KIT_WITH_CUDA
  if (device.is_cuda()) describe_attention_device(d);
#endif
  return d;
}

}  // namespace

Tensor paged_attention(const ForwardContext& ctx, const Tensor& q, const Tensor& k, const Tensor& v,
                       const PagedKvCache& cache, const AttentionMetadata& md, const PagedAttentionOptions& options) {
  require_defined(kOp, q, "q");
  for (const auto& [t, name] : {std::pair{&q, "q"}, std::pair{&k, "k"}, std::pair{&v, "v"},
                                std::pair{&cache.key_cache, "key_cache"}, std::pair{&cache.value_cache, "value_cache"},
                                std::pair{&cache.k_scale, "k_scale"}, std::pair{&cache.v_scale, "v_scale"},
                                std::pair{&md.query_start_loc, "query_start_loc"}, std::pair{&md.seq_lens, "seq_lens"},
                                std::pair{&md.block_table, "block_table"}, std::pair{&md.slot_mapping, "slot_mapping"},
                                std::pair{&options.q_scale, "q_scale"}, std::pair{&options.out, "out"}}) {
    require_context_device(kOp, ctx, *t, name);
  }
  require_dim(kOp, q, "q", 3);
  require_float_input(kOp, q, "q");
  FP8KIT_CHECK_ARG(q.stride(2) == 1 || q.size(2) <= 1,
                   "{}: the last dimension of `q` must be contiguous, got strides {}", kOp,
                   shape_to_string(q.strides()));
  const CacheLayouts layouts = check_paged_caches(kOp, cache.key_cache, cache.value_cache, cache.dtype, q.dtype());
  const int64_t num_tokens = q.size(0), num_heads = q.size(1), head_size = q.size(2);
  const int64_t num_kv_heads = layouts.key.num_kv_heads;
  FP8KIT_CHECK_ARG(layouts.key.head_size == head_size, "{}: `q` has head_size {} but the caches {}", kOp, head_size,
                   layouts.key.head_size);
  FP8KIT_CHECK_ARG(num_kv_heads > 0 && num_heads % num_kv_heads == 0,
                   "{}: num_heads {} of `q` must be a multiple of the caches' num_kv_heads {}", kOp, num_heads,
                   num_kv_heads);
  FP8KIT_CHECK_ARG(k.defined() == v.defined(), "{}: `k` and `v` must both be given or both be undefined", kOp);
  const bool write_new = k.defined();
  if (write_new) {
    check_kv_rows(kOp, k, v, num_kv_heads, head_size);
    FP8KIT_CHECK_ARG(k.dtype() == q.dtype(), "{}: `k` must have the dtype of `q` ({}), got {}", kOp,
                     dtype_name(q.dtype()), k.description());
    require_dim(kOp, md.slot_mapping, "slot_mapping", 1);
    FP8KIT_CHECK_ARG(md.slot_mapping.dtype() == DType::kI64 && md.slot_mapping.is_contiguous(),
                     "{}: `slot_mapping` must be a contiguous i64 tensor, got {}", kOp, md.slot_mapping.description());
    FP8KIT_CHECK_ARG(md.slot_mapping.size(0) <= k.size(0), "{}: `slot_mapping` has {} entries but `k` only {} rows",
                     kOp, md.slot_mapping.size(0), k.size(0));
  }
  const bool fp8 = cache.dtype != KvCacheDtype::kAuto;
  const int64_t scale_stride = fp8 ? check_kv_scales(kOp, cache.k_scale, cache.v_scale, num_kv_heads) : 0;
  check_options(options, cache, num_kv_heads);
  require_defined(kOp, md.seq_lens, "seq_lens");
  require_dim(kOp, md.seq_lens, "seq_lens", 1);
  const int64_t num_seqs = md.seq_lens.size(0);
  require_i32_vector(md.query_start_loc, "query_start_loc", num_seqs + 1);
  require_i32_vector(md.seq_lens, "seq_lens", num_seqs);
  require_defined(kOp, md.block_table, "block_table");
  require_dim(kOp, md.block_table, "block_table", 2);
  FP8KIT_CHECK_ARG(md.block_table.dtype() == DType::kI32 && md.block_table.size(0) == num_seqs &&
                       (md.block_table.stride(1) == 1 || md.block_table.size(1) <= 1),
                   "{}: `block_table` must be i32 [num_seqs = {}, max_blocks_per_seq] with a contiguous last "
                   "dimension, got {}",
                   kOp, num_seqs, md.block_table.description());
  const Shape out_shape{num_tokens, num_heads, head_size};
  if (options.out.defined()) require_output(kOp, options.out, "out", q.dtype(), out_shape, q.device());
  require_backend(kOp, ctx.device());

  // The metadata values: read and checked where they are host memory. On CUDA the kernels read
  // them and skip what is out of range (attention_common.cuh); the longest sequence is bounded
  // by the block table.
  const bool on_cpu = ctx.device().is_cpu();
  const int64_t max_blocks = md.block_table.size(1);
  const int64_t max_seq_len = on_cpu ? check_metadata_values(md, num_seqs, num_tokens, layouts.key, max_blocks)
                                     : max_blocks * layouts.key.block_size;
  if (write_new) {
    if (on_cpu) check_slot_mapping(md, num_seqs, layouts.key.block_size);
    // Padding entries are negative, so the store writes exactly this step's real tokens.
    reshape_and_cache_flash(ctx, k, v, cache.key_cache, cache.value_cache, md.slot_mapping, cache.dtype, cache.k_scale,
                            cache.v_scale);
  }
  Tensor out = options.out.defined() ? options.out : Tensor::empty(out_shape, q.dtype(), q.device());

  PagedAttentionArgs args;
  args.num_tokens = num_tokens;
  args.num_heads = num_heads;
  args.num_kv_heads = num_kv_heads;
  args.head_size = head_size;
  args.num_seqs = num_seqs;
  args.q = q.data_ptr();
  args.q_token_stride = q.stride(0);
  args.q_head_stride = q.stride(1);
  args.dtype = q.dtype();
  args.out = out.data_ptr();
  args.key_cache = cache.key_cache.data_ptr();
  args.value_cache = cache.value_cache.data_ptr();
  args.key_layout = layouts.key;
  args.value_layout = layouts.value;
  args.cache_dtype = cache.dtype;
  if (fp8) {
    args.k_scale = cache.k_scale.data<float>();
    args.v_scale = cache.v_scale.data<float>();
    args.kv_scale_stride = scale_stride;
  }
  args.query_start_loc = md.query_start_loc.data<int32_t>();
  args.seq_lens = md.seq_lens.data<int32_t>();
  args.block_table = md.block_table.data<int32_t>();
  args.block_table_stride = md.block_table.stride(0);
  args.max_blocks_per_seq = max_blocks;
  args.max_seq_len = max_seq_len;
  args.scale = options.scale.value_or(float(std::pow(double(head_size), -0.5)));  // Python head_size**-0.5
  args.softcap = options.softcap;
  args.window_left = options.window_left;
  args.window_right = options.window_right;
  args.causal = options.causal;
  args.read_mode = options.read_mode;
  if (options.read_mode == AttentionReadMode::kFp8Compute) {
    args.q_scale = options.q_scale.data<float>();
    args.q_scale_stride = options.q_scale.numel() == 1 ? 0 : 1;
  }
  Workspace::Scope scope(ctx.workspace());
  if (on_cpu) {
    args.num_parts = work_parts(ctx);
    args.scratch = ctx.workspace().take({args.num_parts, scratch_floats_per_part(args)}, DType::kF32).data<float>();
    paged_attention_cpu(args, ctx.overrides(), ctx.num_threads());
  } else {
    args.plan = plan_paged_attention(describe(args, layouts, ctx.device()), ctx.overrides());
    args.device_scratch = ctx.workspace().take({args.plan.scratch_bytes}, DType::kU8).data_ptr();
    route(kOp, ctx, ctx.device(), args, paged_attention_ref, paged_attention_cuda);
  }
  return out;
}

}  // namespace fp8kit::ops
